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
  const int gpus = num_gpus();
  const int nvswitch = gpus, leaf = nvswitch + nodes, spine = leaf + nics_per_node_;  // first vertices
  for (int r = 0; r < gpus; ++r)
    links_.push_back({r, nvswitch + r / gpus_per_node_, cluster.intra_node.peak_bus_bandwidth(),
                      cluster.intra_node.hop_latency_s() / 2});
  if (nodes == 1) return;
  for (int node = 0; node < nodes; ++node)
    for (int rail = 0; rail < nics_per_node_; ++rail)
      links_.push_back({node * gpus_per_node_ + rail, leaf + rail, cluster.inter_node.bytes_per_second,
                        cluster.inter_node.hop_latency_s() / 2});
  for (int rail = 0; rail < nics_per_node_; ++rail)
    links_.push_back(
        {leaf + rail, spine,
         cluster.num_nodes * cluster.inter_node.bytes_per_second / cluster.spine_oversubscription, 0});
}

int RailFatTree::nic_link(int gpu) const {
  return num_gpus() + gpu / gpus_per_node_ * nics_per_node_ + rail(gpu);
}

std::vector<RouteHop> RailFatTree::route(int from, int to) const {
  if (from == to) return {};
  if (from / gpus_per_node_ == to / gpus_per_node_) return {{from, true}, {to, false}};
  if (rail(from) == rail(to)) return {{nic_link(from), true}, {nic_link(to), false}};
  const int spine = num_gpus() + nodes_ * nics_per_node_;
  return {
      {nic_link(from), true}, {spine + rail(from), true}, {spine + rail(to), false}, {nic_link(to), false}};
}

std::shared_ptr<const Topology> cluster_topology(const ClusterSpec& cluster, int nodes) {
  if (cluster.network) return cluster.network;
  return std::make_shared<const RailFatTree>(cluster, nodes);
}

}  // namespace paradyse::hw
