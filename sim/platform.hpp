// The SimGrid platform of a cluster: every GPU, switch and link of its network (hw::Topology: the
// graph its file describes, or the built-in rail-optimised fat tree), and each pair's route the
// topology's.
//
// Of the built-in fat tree only the nodes a job uses are built: the first ceil(num_gpus /
// gpus_per_node) nodes, whose GPUs are ranks 0..num_gpus−1. The nodes left out carry no traffic of
// the job, so they change nothing (the spine's uplinks carry the cluster's real node count). Routes
// are not stored per pair (that grew with the square of the GPU count): the zone asks the topology
// for each one when SimGrid asks for it. Memory is thus linear in the GPUs built.
//
// The network model is CM02 without cross traffic and without the TCP-gamma window cap
// (SimGrid's default, LV08, multiplies latency by 13.01, caps each flow at TCP-gamma / (2·latency) and
// adds cross traffic: with SimGrid 3.32 a 1 MiB ring all-reduce over 8 GPUs came out 10.9× too slow, a
// lone 300 GB/s link 2.78× too slow at 10 µs latency), so a flow alone on its route
// streams at its bottleneck link's bandwidth and flows sharing a link share it fairly.
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
  std::unique_ptr<simgrid::s4u::Engine> engine_;
  std::vector<simgrid::s4u::Host*> gpus_;
};

}  // namespace paradyse::sim
