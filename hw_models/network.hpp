// A cluster's network as data: its GPUs (gpu0 … gpuN−1, in rank order), its switches (NVSwitches,
// NICs, leaf and spine switches: anything that forwards) and the links between them, each split
// duplex, with its bandwidth and latency per direction. Routes are computed from the graph
// (Boost.Graph's breadth-first search): the shortest paths in links, through switches only (a GPU
// sends and receives, it does not forward), and of those the widest (the highest bottleneck
// bandwidth: two GPUs of a node joined by an NVSwitch and by a leaf switch their NICs share talk over
// NVLink, as NCCL's peer-to-peer path does); where several remain, each pair of GPUs takes one of
// them by a hash of the pair, as ECMP spreads flows over equal routes.
//
// In a cluster file, the optional block
//   "network": {"nodes": 2, "switches": ["nvswitch0", "leaf0", ...],
//               "links": [{"between": ["gpu0", "nvswitch0"], "bytes_per_second": 2.4e11,
//                          "latency_seconds": 1e-6}, ...],
//               "source": {"bytes_per_second": "...", "latency_seconds": "..."}}
// describes it; a GPU that reaches no other GPU, a link of no bandwidth, or a link to a node that is
// neither a GPU of the cluster nor a named switch is refused, naming the file and the element.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/json_input.hpp"
#include "hw_models/topology.hpp"

namespace paradyse::hw {

// Switches are vertices gpus, gpus + 1, … in the order the file names them.
class Network final : public Topology {
 public:
  // Throws InputError (naming `source` and the element) for an unknown vertex, a GPU linked to
  // itself, a link of no bandwidth, or a GPU with no route to another.
  Network(int nodes, int gpus, std::vector<std::string> switches, std::vector<NetworkLink> links,
          const std::string& source);
  ~Network() override;

  int num_gpus() const override { return gpus_; }
  int num_nodes() const { return nodes_; }
  int num_vertices() const { return gpus_ + static_cast<int>(switches_.size()); }
  const std::vector<NetworkLink>& links() const override { return links_; }
  std::string vertex_name(int vertex) const;
  std::vector<RouteHop> route(int from, int to) const override;

 private:
  // Routes into GPU `to`, computed on first use: every vertex's hops to it through switches only (−1
  // where none), and the highest bottleneck bandwidth of its shortest routes.
  struct Toward {
    std::vector<int> distance;
    std::vector<double> width;
  };
  const Toward& toward(int to) const;
  // Whether `neighbour` is a hop of a shortest route from `at` into `to`.
  bool nearer(const Toward& toward, int at, int neighbour, int to) const;
  // The width of going on through `link` to `neighbour`.
  double onward(const Toward& toward, int neighbour, int link) const;
  std::string unreachable(const std::vector<int>& distances) const;

  struct Graph;  // Boost.Graph's, both directions of every link
  std::unique_ptr<const Graph> graph_;
  int nodes_, gpus_;
  std::vector<std::string> switches_;
  std::vector<NetworkLink> links_;
  std::vector<std::vector<std::pair<int, int>>> adjacent_;  // per vertex: (neighbour, link)
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<int, std::unique_ptr<Toward>> toward_;
};

// Reads the "network" block of a cluster file (`block` is it) for nodes of `gpus_per_node` GPUs; the
// block says how many nodes it joins ("nodes"). Its "source" is the cluster file's to check.
std::shared_ptr<const Network> read_network(const json_input::Object& block, int gpus_per_node);

}  // namespace paradyse::hw
