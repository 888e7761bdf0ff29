// The discrete-event simulator: every rank's program, executed op by op on a SimGrid model of the
// cluster (platform.hpp). Every rank runs its program on a compute and a
// communication stream; an op starts when its stream is free and its dependencies are done; kernels
// take the costmodel's compute time; collectives become NCCL-style flows over the links
// (collective_flows.hpp), so concurrent flows contend; memory follows the programs' allocations and
// frees (memory_timeline.hpp).
//
// Usage:
//   sim::Simulator simulator(cluster);
//   sim::SimulationResult r = simulator.run(programs, static_bytes);
//
// A plan's or a grouped step's programs are traced and run by steps::StepSimulator.
//
// SimGrid keeps one engine per process, so one Simulator exists at a time; it can run any number of
// simulations. Results depend on the inputs only: the same inputs give the same numbers. The SimGrid
// platform is built at the first simulation, with only the nodes the job uses, and rebuilt larger
// when a later job needs more: memory follows the degree, not the cluster's size.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hw_models/cluster.hpp"
#include "program/program.hpp"

namespace paradyse::sim {

struct SimulationOptions {
  // A collective that would need more flows than this takes the analytic model's time on the routed
  // network instead (its flows' most loaded link, without other collectives' contention), so that
  // groups of thousands of GPUs stay cheap to simulate; 0: every collective.
  int max_flows_per_collective = 4096;
  bool record_timeline = false;  // keep every op's start and end for write_timeline
  // Called now and then with what the simulation is doing ("tracing" the programs, "simulating" them)
  // and how far it is (`done` of `total` ranks traced or ops run), for a progress bar; a simulation of
  // a large job can take minutes. Unset: nothing is reported.
  std::function<void(std::string_view phase, uint64_t done, uint64_t total)> progress;
};

struct RankResult {
  double compute_s = 0;       // the compute stream busy
  double exposed_comm_s = 0;  // communication in flight while the compute stream is not busy
  // The compute stream idle, with no communication in flight, waiting for the host to issue its next
  // op: the step runs at the framework's pace there, not the GPU's.
  double host_bound_s = 0;
  double idle_s = 0;  // none of these: the iteration time minus the three above (waiting on other ranks)
  double peak_memory_bytes = 0;  // static terms + live tensors at their peak + allocator fragmentation
};

// The first allocation that did not fit: the op it preceded on the first rank that ran out.
struct OutOfMemory {
  int rank = 0;
  Phase phase = Phase::layer_forward;
  int layer = -1;
  std::string op;       // "kind label", or "end of step"
  double bytes = 0;     // what the rank would have held
  double capacity = 0;  // what it may hold
};

// What a rank did over time, kept with record_timeline.
struct RankTimeline {
  std::vector<double> op_start_s, op_end_s;       // per op of the program, from the iteration's start
  std::vector<std::pair<double, double>> memory;  // (seconds, bytes held) after each allocation or free
};

struct SimulationResult {
  std::string plan;  // plan_name()
  int64_t tokens = 0;
  int64_t padded_tokens = 0;
  int64_t documents = 1;  // packed in the sequence
  int degree = 0;
  int64_t batch = 1;
  int64_t micro_batches = 1;
  double iteration_time_s = 0;  // from the first op to the last op of any rank
  std::vector<RankResult> per_rank;
  double peak_memory_bytes = 0;  // max over ranks
  double host_peak_bytes = 0;    // host memory of offloaded activations, max over ranks
  double capacity_bytes = 0;     // per rank: HBM minus the reserve
  bool oom = false;
  std::optional<OutOfMemory> oom_at;
  uint64_t kernels = 0;               // compute ops run
  uint64_t flows = 0;                 // network transfers simulated
  uint64_t analytic_collectives = 0;  // collectives timed by the analytic model (max_flows_per_collective)
  uint64_t events() const { return kernels + flows + analytic_collectives; }
  double mean_host_bound_s() const {  // RankResult::host_bound_s, the mean over ranks
    if (per_rank.empty()) return 0;
    double sum = 0;
    for (const RankResult& rank : per_rank) sum += rank.host_bound_s;
    return sum / static_cast<double>(per_rank.size());
  }
  std::vector<Program> programs;       // with record_timeline
  std::vector<RankTimeline> timeline;  // with record_timeline
};

// A point-to-point transfer between two ranks, for probing the network on its own.
struct Transfer {
  int from = 0;
  int to = 0;
  double bytes = 0;
};

// How collectives are decomposed, in a sentence for reports.
std::string collective_algorithm_description(const SimulationOptions& options);

class Simulator {
 public:
  explicit Simulator(hw::ClusterSpec cluster, SimulationOptions options = {});
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Rank r of programs runs on GPU r; every rank starts with `static_bytes` held (weights, gradients,
  // optimizer states). Programs must issue the same collectives in the same order on every rank.
  SimulationResult run(std::vector<Program> programs, double static_bytes = 0);
  // Seconds until each transfer completes when all start together on an otherwise idle network.
  std::vector<double> transfer_s(const std::vector<Transfer>& transfers);

  const hw::ClusterSpec& cluster() const { return cluster_; }
  const SimulationOptions& options() const { return options_; }
  // Builds the engine and platform for jobs of up to `num_gpus` ranks now, not at the first run, so
  // that children forked afterwards share this one instead of each building its own.
  void prepare(int num_gpus) { engine_for(num_gpus); }
  // GPUs of the SimGrid platform built so far: the whole nodes of the largest job run (platform.hpp);
  // 0 before the first.
  int built_gpus() const;

 private:
  struct Engine;  // SimGrid's engine and platform
  // The engine, its platform holding GPUs 0..num_gpus−1: rebuilt larger when a job needs more.
  Engine& engine_for(int num_gpus);
  hw::ClusterSpec cluster_;
  SimulationOptions options_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace paradyse::sim
