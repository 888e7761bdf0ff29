// Network graphs written as a cluster file's "network" block, for tests: the simulator's built-in
// rail-optimised fat tree, and a fat tree with one leaf switch per node.
#pragma once

#include <string>

#include "common/json_input.hpp"
#include "hw_models/cluster.hpp"

namespace paradyse::testing {

inline json_input::Json network_block(int nodes) {
  return {{"nodes", nodes},
          {"switches", json_input::Json::array()},
          {"links", json_input::Json::array()},
          {"source", {{"bytes_per_second", "test"}, {"latency_seconds", "test"}}}};
}

inline void add_link(json_input::Json& block, const std::string& a, const std::string& b,
                     double bytes_per_second, double latency_s) {
  block["links"].push_back(
      {{"between", {a, b}}, {"bytes_per_second", bytes_per_second}, {"latency_seconds", latency_s}});
}

inline std::string gpu_name(int node, int local, int gpus_per_node) {
  return "gpu" + std::to_string(node * gpus_per_node + local);
}

// Every GPU's NVLink link into its node's NVSwitch ("nvswitch<node>"), as the built-in tree has them.
inline void add_nvlink_links(json_input::Json& block, const hw::ClusterSpec& cluster, int nodes) {
  const int g = cluster.gpus_per_node;
  for (int n = 0; n < nodes; ++n)
    for (int i = 0; i < g; ++i)
      add_link(block, gpu_name(n, i, g), "nvswitch" + std::to_string(n),
               cluster.intra_node.peak_bus_bandwidth(), cluster.intra_node.hop_latency_s() / 2);
}

// sim/platform.hpp's fat tree of `nodes` nodes of `cluster` (one NIC per GPU), link for link: an
// NVSwitch per node, a leaf per rail, one spine with an uplink per leaf of the rail's NIC bandwidth
// over the oversubscription.
inline json_input::Json rail_fat_tree(const hw::ClusterSpec& cluster, int nodes, double oversubscription) {
  const int g = cluster.gpus_per_node;
  json_input::Json block = network_block(nodes);
  for (int n = 0; n < nodes; ++n) block["switches"].push_back("nvswitch" + std::to_string(n));
  for (int rail = 0; rail < g; ++rail) block["switches"].push_back("leaf" + std::to_string(rail));
  block["switches"].push_back("spine");
  add_nvlink_links(block, cluster, nodes);
  for (int n = 0; n < nodes; ++n)
    for (int i = 0; i < g; ++i)
      add_link(block, gpu_name(n, i, g), "leaf" + std::to_string(i), cluster.inter_node.bytes_per_second,
               cluster.inter_node.hop_latency_s() / 2);
  for (int rail = 0; rail < g; ++rail)
    add_link(block, "leaf" + std::to_string(rail), "spine",
             nodes * cluster.inter_node.bytes_per_second / oversubscription, 0);
  return block;
}

// The three-level tree of `nodes` nodes of `cluster` in pods of cluster.pod_nodes (one NIC per GPU),
// link for link: an NVSwitch per node, a leaf per pod and rail, a spine per pod with an uplink per leaf
// of the pod's NIC bandwidth on that rail over the oversubscription, a core with an uplink per spine of
// all the pod's NIC bandwidth.
inline json_input::Json pod_fat_tree(const hw::ClusterSpec& cluster, int nodes, double oversubscription) {
  const int g = cluster.gpus_per_node, pod = cluster.pod_nodes, pods = (nodes + pod - 1) / pod;
  const double nic = cluster.inter_node.bytes_per_second;
  const auto leaf = [&](int p, int rail) { return "leaf" + std::to_string(p) + "-" + std::to_string(rail); };
  json_input::Json block = network_block(nodes);
  for (int n = 0; n < nodes; ++n) block["switches"].push_back("nvswitch" + std::to_string(n));
  for (int p = 0; p < pods; ++p)
    for (int rail = 0; rail < g; ++rail) block["switches"].push_back(leaf(p, rail));
  for (int p = 0; p < pods; ++p) block["switches"].push_back("spine" + std::to_string(p));
  block["switches"].push_back("core");
  add_nvlink_links(block, cluster, nodes);
  for (int n = 0; n < nodes; ++n)
    for (int i = 0; i < g; ++i)
      add_link(block, gpu_name(n, i, g), leaf(n / pod, i), nic, cluster.inter_node.hop_latency_s() / 2);
  for (int p = 0; p < pods; ++p)
    for (int rail = 0; rail < g; ++rail)
      add_link(block, leaf(p, rail), "spine" + std::to_string(p), pod * nic / oversubscription, 0);
  for (int p = 0; p < pods; ++p) add_link(block, "spine" + std::to_string(p), "core", pod * g * nic, 0);
  return block;
}

// A leaf switch per node that every NIC of the node joins (no rails), and one spine with an uplink per
// leaf of the node's NIC bandwidth over the oversubscription.
inline json_input::Json top_of_rack_tree(const hw::ClusterSpec& cluster, int nodes, double oversubscription) {
  const int g = cluster.gpus_per_node;
  json_input::Json block = network_block(nodes);
  for (int n = 0; n < nodes; ++n) {
    block["switches"].push_back("nvswitch" + std::to_string(n));
    block["switches"].push_back("leaf" + std::to_string(n));
  }
  block["switches"].push_back("spine");
  for (int n = 0; n < nodes; ++n) {
    for (int i = 0; i < g; ++i) {
      add_link(block, gpu_name(n, i, g), "nvswitch" + std::to_string(n),
               cluster.intra_node.peak_bus_bandwidth(), cluster.intra_node.hop_latency_s() / 2);
      add_link(block, gpu_name(n, i, g), "leaf" + std::to_string(n), cluster.inter_node.bytes_per_second,
               cluster.inter_node.hop_latency_s() / 2);
    }
    add_link(block, "leaf" + std::to_string(n), "spine",
             g * cluster.inter_node.bytes_per_second / oversubscription, 0);
  }
  return block;
}

// The dgx-a100 preset with `network` as its network block, as JSON text.
inline std::string a100_with_network(const json_input::Json& network) {
  json_input::Json json = json_input::parse(hw::cluster_preset_text("dgx-a100"), "test");
  json["network"] = network;
  return json.dump(1);
}

}  // namespace paradyse::testing
