#include "hw_models/rail_fat_tree.hpp"

#include <algorithm>

#include "common/errors.hpp"

namespace paradyse::hw {

RailFatTree::RailFatTree(const ClusterSpec& cluster, int nodes)
    : nodes_(nodes),
      gpus_per_node_(cluster.gpus_per_node),
      nics_per_node_(std::max(1, std::min(cluster.nics_per_node, cluster.gpus_per_node))) {
  PARADYSE_CHECK(nodes >= 1 && nodes <= cluster.num_nodes, "a fat tree of " + std::to_string(nodes) +
                                                               " of a cluster's " +
                                                               std::to_string(cluster.num_nodes) + " nodes");
  if (cluster.pod_nodes > 0 && cluster.num_nodes > cluster.pod_nodes) {
    pod_nodes_ = cluster.pod_nodes;
    pods_ = (nodes + pod_nodes_ - 1) / pod_nodes_;
  }
  const int gpus = num_gpus(), leaves = pods_ * nics_per_node_;
  // First vertices: an NVSwitch per node, the leaves (pod-major), a spine per pod or the one spine,
  // then with three levels the core.
  const int nvswitch = gpus, leaf = nvswitch + nodes, spine = leaf + leaves, core = spine + pods_;
  for (int r = 0; r < gpus; ++r)
    links_.push_back({r, nvswitch + r / gpus_per_node_, cluster.intra_node.peak_bus_bandwidth(),
                      cluster.intra_node.hop_latency_s() / 2});
  if (nodes == 1) return;
  for (int node = 0; node < nodes; ++node)
    for (int rail = 0; rail < nics_per_node_; ++rail) {
      const int gpu = node * gpus_per_node_ + rail;
      links_.push_back({gpu, leaf + this->leaf(gpu), cluster.inter_node.bytes_per_second,
                        cluster.inter_node.hop_latency_s() / 2});
    }
  // A leaf's uplink carries its nodes' NICs on its rail: the cluster's, or its pod's.
  const int leaf_nodes = pod_nodes_ > 0 ? pod_nodes_ : cluster.num_nodes;
  first_uplink_ = static_cast<int>(links_.size());
  for (int l = 0; l < leaves; ++l)
    links_.push_back({leaf + l, spine + l / nics_per_node_,
                      leaf_nodes * cluster.inter_node.bytes_per_second / cluster.spine_oversubscription, 0});
  if (pod_nodes_ == 0) return;
  first_core_link_ = static_cast<int>(links_.size());
  for (int p = 0; p < pods_; ++p)
    links_.push_back({spine + p, core, pod_nodes_ * nics_per_node_ * cluster.inter_node.bytes_per_second, 0});
}

int RailFatTree::nic_link(int gpu) const {
  return num_gpus() + gpu / gpus_per_node_ * nics_per_node_ + rail(gpu);
}

std::vector<RouteHop> RailFatTree::route(int from, int to) const {
  if (from == to) return {};
  if (from / gpus_per_node_ == to / gpus_per_node_) return {{from, true}, {to, false}};
  if (leaf(from) == leaf(to)) return {{nic_link(from), true}, {nic_link(to), false}};
  const RouteHop up{nic_link(from), true}, leaf_up{first_uplink_ + leaf(from), true};
  const RouteHop leaf_down{first_uplink_ + leaf(to), false}, down{nic_link(to), false};
  if (pod(from) == pod(to)) return {up, leaf_up, leaf_down, down};
  return {up,        leaf_up, {first_core_link_ + pod(from), true}, {first_core_link_ + pod(to), false},
          leaf_down, down};
}

std::shared_ptr<const Topology> cluster_topology(const ClusterSpec& cluster, int nodes) {
  if (cluster.network) return cluster.network;
  return std::make_shared<const RailFatTree>(cluster, nodes);
}

}  // namespace paradyse::hw
