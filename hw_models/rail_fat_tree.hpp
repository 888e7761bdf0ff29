// The built-in network of a cluster that describes none: inside a node every GPU has a split-duplex
// NVLink link into a non-blocking NVSwitch; between nodes every GPU has its NIC (rail; GPUs share
// them in turn where a node has fewer), and a two-level fat tree joins them: one leaf switch per rail
// (non-blocking), the spine aggregated into one split-duplex uplink per leaf whose bandwidth is the
// NIC bandwidth of the cluster's nodes on that rail over the cluster's spine_oversubscription.
// Routes: same node over NVLink, same rail NIC to NIC through the leaf, other rails up through the
// spine.
//
// Link bandwidths are the fabrics' calibrated effective figures (NVLink: the NCCL ring's peak bus
// bandwidth; NIC: the effective per-NIC rate), not datasheet rates; each route's latency is one ring
// hop of its fabric (hw::FabricSpec::hop_latency_s).
#pragma once

#include <memory>

#include "hw_models/cluster.hpp"
#include "hw_models/topology.hpp"

namespace paradyse::hw {

class RailFatTree final : public Topology {
 public:
  // The first `nodes` nodes of `cluster` (1 ≤ nodes ≤ cluster.num_nodes): the ones a job uses. The
  // spine's uplinks still carry the cluster's real node count over the oversubscription.
  RailFatTree(const ClusterSpec& cluster, int nodes);

  int num_gpus() const override { return nodes_ * gpus_per_node_; }
  const std::vector<NetworkLink>& links() const override { return links_; }
  std::vector<RouteHop> route(int from, int to) const override;

 private:
  int rail(int gpu) const { return gpu % gpus_per_node_ % nics_per_node_; }
  int nic_link(int gpu) const;

  int nodes_, gpus_per_node_, nics_per_node_;
  // NVLink per GPU, then (more than one node) NIC per node and rail, then the spine uplink per rail.
  std::vector<NetworkLink> links_;
};

// The cluster's network graph where its file describes one; otherwise the rail fat tree of its
// first `nodes` nodes.
std::shared_ptr<const Topology> cluster_topology(const ClusterSpec& cluster, int nodes);

}  // namespace paradyse::hw
