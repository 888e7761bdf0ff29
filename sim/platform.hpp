// The SimGrid platform of a cluster preset. Inside a node every GPU has a split-duplex NVLink link
// into a non-blocking NVSwitch; between nodes every GPU has its own NIC (rail), and a two-level fat
// tree joins them: one leaf switch per rail (non-blocking), the spine aggregated into one
// split-duplex uplink per leaf whose bandwidth is the leaf's NIC bandwidth over the cluster's
// spine_oversubscription.
// Routes: same node over NVLink, same rail NIC to NIC through the leaf, other rails up through the
// spine.
//
// A cluster file may describe its network as a graph instead (hw::Network): then every GPU, switch
// and link of it is built as the file gives them, and each pair's route is the graph's.
//
// Only the nodes a job uses are built: the first ceil(num_gpus / gpus_per_node) nodes, whose GPUs
// are ranks 0..num_gpus−1. The nodes left out carry no traffic of the job, so they change nothing,
// except through the spine: a leaf's uplink carries the NIC bandwidth of the cluster's real node
// count (cluster.num_nodes) over the oversubscription, whatever the number of nodes built. Routes
// are not stored per pair (that grew with the square of the GPU count): the zone computes each one
// when SimGrid asks for it, from the two GPUs' node and rail. Memory is thus linear in the GPUs built.
//
// Link bandwidths are the fabrics' calibrated effective figures (NVLink: the NCCL ring's peak bus
// bandwidth; NIC: the effective per-NIC rate), not datasheet rates; each route's latency is one ring
// hop of its fabric (hw::FabricSpec::hop_latency_s). The network model is CM02 without cross
// traffic and without the TCP-gamma window cap (REFERENCE.md §4: SimGrid's defaults are off by 10×
// for GPU fabrics), so a flow alone on its route streams at its bottleneck link's bandwidth and
// flows sharing a link share it fairly.
#pragma once

#include <simgrid/s4u.hpp>

#include <memory>
#include <vector>

#include "hw_models/cluster.hpp"

namespace paradyse::sim {

class Platform {
 public:
  // Creates SimGrid's engine (one per process at a time) and the platform of the nodes of `cluster`
  // that hold GPUs 0..num_gpus−1 (1 ≤ num_gpus ≤ cluster.num_gpus()).
  Platform(const hw::ClusterSpec& cluster, int num_gpus);
  ~Platform();
  Platform(const Platform&) = delete;
  Platform& operator=(const Platform&) = delete;

  simgrid::s4u::Engine& engine() { return *engine_; }
  simgrid::s4u::Host* gpu(int rank) const { return gpus_[static_cast<std::size_t>(rank)]; }
  // GPUs built: whole nodes, so num_gpus rounded up to a multiple of gpus_per_node.
  int num_gpus() const { return static_cast<int>(gpus_.size()); }

 private:
  // The cluster's network graph, every GPU of it, routes from the graph.
  void build_graph(const hw::ClusterSpec& cluster);

  std::unique_ptr<simgrid::s4u::Engine> engine_;
  std::vector<simgrid::s4u::Host*> gpus_;
};

}  // namespace paradyse::sim
