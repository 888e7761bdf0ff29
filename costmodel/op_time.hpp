// Seconds of one traced op on a cluster: GEMMs and attention at size-dependent efficiency, memory-bound
// kernels at HBM copy bandwidth, collectives and transfers by the α–β model over NCCL's measured bus
// bandwidth by message size (REFERENCE.md §3).
#pragma once

#include "hw_models/cluster.hpp"
#include "strategies/program.hpp"

namespace paradyse::costmodel {

class OpTimer {
 public:
  // `degree` ranks form the group; a group wider than one node goes over the NICs.
  OpTimer(const hw::ClusterSpec& cluster, int degree);

  double seconds(const Op& op) const;
  double compute_seconds(const Op& op) const;
  double communication_seconds(const Op& op) const;

 private:
  const hw::ClusterSpec& cluster_;
  const hw::FabricSpec& fabric_;
};

}  // namespace paradyse::costmodel
