// The built-in network of a cluster that describes none: inside a node every GPU has a split-duplex
// NVLink link into a non-blocking NVSwitch; between nodes every GPU has its NIC (rail; GPUs share
// them in turn where a node has fewer) on its rail's leaf switch (non-blocking), and the leaves join
// through a spine.
//
// Two levels by default: one leaf per rail for the whole cluster, the spine aggregated into one
// split-duplex uplink per leaf whose bandwidth is the NIC bandwidth of the cluster's nodes on that
// rail over the cluster's spine_oversubscription. Routes: same node over NVLink, same rail NIC to NIC
// through the leaf, other rails up through the spine.
//
// Three levels where the cluster groups its nodes in pods (ClusterSpec::pod_nodes, as a DGX SuperPOD
// groups them in scalable units) and has more nodes than one pod: one leaf per rail in every pod,
// whose uplink to its pod's spine carries the pod's NICs on that rail over the oversubscription; one
// vertex per pod for its spine switches, whose uplink to the core carries every NIC of the pod (a
// non-blocking core); one vertex for the core. Routes: within a pod as above, through the pod's spine;
// between pods up to the core and down.
//
// Link bandwidths are the fabrics' calibrated effective figures (NVLink: the NCCL ring's peak bus
// bandwidth; NIC: the effective per-NIC rate), not datasheet rates; each route's latency is one ring
// hop of its fabric (hw::FabricSpec::hop_latency_s), the uplinks adding none.
#pragma once

#include <memory>

#include "hw_models/cluster.hpp"
#include "hw_models/topology.hpp"

namespace paradyse::hw {

class RailFatTree final : public Topology {
 public:
  // The first `nodes` nodes of `cluster` (1 ≤ nodes ≤ cluster.num_nodes): the ones a job uses, and
  // the switches they reach. The uplinks still carry the cluster's real node count (two levels) or a
  // whole pod (three) over the oversubscription.
  RailFatTree(const ClusterSpec& cluster, int nodes);

  int num_gpus() const override { return nodes_ * gpus_per_node_; }
  const std::vector<NetworkLink>& links() const override { return links_; }
  std::vector<RouteHop> route(int from, int to) const override;

 private:
  int rail(int gpu) const { return gpu % gpus_per_node_ % nics_per_node_; }
  int pod(int gpu) const { return pod_nodes_ > 0 ? gpu / gpus_per_node_ / pod_nodes_ : 0; }
  int leaf(int gpu) const { return pod(gpu) * nics_per_node_ + rail(gpu); }
  int nic_link(int gpu) const;

  int nodes_, gpus_per_node_, nics_per_node_;
  int pod_nodes_ = 0;  // three levels: the nodes of a pod; 0: two levels
  int pods_ = 1;       // pods the job's nodes reach
  // NVLink per GPU, then (more than one node) NIC per node and rail, the uplink per leaf (pod-major),
  // and with three levels the core uplink per pod.
  std::vector<NetworkLink> links_;
  int first_uplink_ = 0, first_core_link_ = 0;
};

// The cluster's network graph where its file describes one; otherwise the rail fat tree of its
// first `nodes` nodes.
std::shared_ptr<const Topology> cluster_topology(const ClusterSpec& cluster, int nodes);

}  // namespace paradyse::hw
