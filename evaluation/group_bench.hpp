// How good and how fast the group solver is (group_solver.hpp), on global batches of a real trace:
// against the exact MILP (group_milp.hpp) on small batches, and its solve time on large ones, each
// priced by a policy at every degree (group_costs.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hw_models/cluster.hpp"
#include "sim/simulator.hpp"
#include "strategies/model.hpp"

namespace paradyse::evaluation {

struct GroupBenchOptions {
  std::string policy = "switching";  // prices each sequence at each degree (group_costs.hpp)
  std::string shard_group = "job";   // what the weights are sharded over (parse_shard_group)
  int small_instances = 50;
  int small_job = 8;
  int small_sequences = 6;  // drawn at random from the trace
  double milp_time_limit_s = 10;
  int large_job = 32;
  int large_steps = 50;
  int64_t large_batch_tokens = int64_t{1}
                               << 20;  // consecutive sequences of the trace, up to this many tokens
  uint64_t seed = 1;
  // The first large batch's grouped step simulated on this many GPUs (0: not simulated), its
  // collectives needing more flows than this timed analytically (sim::SimulationOptions).
  int simulate_job = 64;
  int max_flows_per_collective = sim::SimulationOptions{}.max_flows_per_collective;
};

struct GroupBenchResult {
  // Small batches: greedy over the MILP's objective − 1, where CBC proved its schedule optimal.
  std::vector<double> gaps;
  int small_unproven = 0;      // CBC hit its time limit
  std::vector<double> milp_s;  // CBC's solve time per instance
  // Large batches: the greedy's solve time, the time to price the batch first, rounds, imbalance.
  std::vector<double> greedy_s, pricing_s, rounds, imbalance;
  std::vector<double> sequences;  // per large batch
  // The simulated step: wall time to trace and simulate it, its simulated time, its rounds.
  double simulate_wall_s = 0, simulated_s = 0;
  int64_t simulated_rounds = 0, simulated_kernels = 0, simulated_flows = 0, analytic_collectives = 0;
};

// `small_cluster`, `large_cluster` and `simulate_cluster` hold the jobs' GPUs; `lengths` is the trace
// in dataset order.
GroupBenchResult bench_group_solver(
    const ModelSpec& model, const hw::ClusterSpec& small_cluster, const hw::ClusterSpec& large_cluster,
    const hw::ClusterSpec& simulate_cluster, const std::vector<int64_t>& lengths,
    const GroupBenchOptions& options,
    const std::function<void(std::string_view, uint64_t, uint64_t)>& progress = {});

// The p-th percentile (0–100) by the nearest-rank method.
double percentile(std::vector<double> values, double p);

}  // namespace paradyse::evaluation
