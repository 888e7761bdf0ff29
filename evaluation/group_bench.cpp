#include "evaluation/group_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>

#include "common/errors.hpp"
#include "evaluation/group_compare.hpp"
#include "selector/group_costs.hpp"
#include "selector/group_milp.hpp"
#include "steps/step_simulator.hpp"

namespace paradyse::evaluation {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double percentile(std::vector<double> values, double p) {
  PARADYSE_CHECK(!values.empty(), "percentile of nothing");
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100 * static_cast<double>(values.size())));
  return values[std::min(values.size(), std::max<std::size_t>(rank, 1)) - 1];
}

GroupBenchResult bench_group_solver(
    const ModelSpec& model, const hw::ClusterSpec& small_cluster, const hw::ClusterSpec& large_cluster,
    const hw::ClusterSpec& simulate_cluster, const std::vector<int64_t>& lengths,
    const GroupBenchOptions& options,
    const std::function<void(std::string_view, uint64_t, uint64_t)>& progress) {
  PARADYSE_CHECK(!lengths.empty(), "a trace without sequences");
  GroupBenchResult result;
  // The most tokens a micro-batch may hold: a large batch's, or the longest sequence's.
  const int64_t longest =
      std::max(*std::max_element(lengths.begin(), lengths.end()), options.large_batch_tokens);

  // Prices on a job of `job` GPUs of `cluster`, its weights sharded as options.shard_group says.
  const auto costs_on = [&](const hw::ClusterSpec& cluster, int job) {
    selector::GroupPricingOptions pricing;
    pricing.shard_degree = parse_shard_group(options.shard_group, cluster, job);
    return std::make_unique<selector::GroupCosts>(model, cluster, job, options.policy, longest, pricing);
  };
  const std::unique_ptr<selector::GroupCosts> small = costs_on(small_cluster, options.small_job);
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<std::size_t> pick(0, lengths.size() - 1);
  for (int i = 0; i < options.small_instances; ++i) {
    if (progress)
      progress("small batches against the MILP", static_cast<uint64_t>(i),
               static_cast<uint64_t>(options.small_instances));
    std::vector<int64_t> batch;
    for (int s = 0; s < options.small_sequences; ++s) batch.push_back(lengths[pick(rng)]);
    const selector::GroupProblem problem = small->problem(batch);
    // The MILP's model: rounds the job's, whatever the shard groups.
    const selector::GroupSchedule greedy = selector::solve_job_rounds(problem);
    const auto start = std::chrono::steady_clock::now();
    const selector::MilpSolution exact = selector::solve_groups_milp(
        problem, static_cast<int>(greedy.rounds.size()) + 1, options.milp_time_limit_s);
    result.milp_s.push_back(seconds_since(start));
    if (!exact.optimal || exact.schedule.seconds <= 0) {
      ++result.small_unproven;
      continue;
    }
    result.gaps.push_back(greedy.seconds / exact.schedule.seconds - 1);
  }

  const std::unique_ptr<selector::GroupCosts> large = costs_on(large_cluster, options.large_job);
  std::size_t next = 0;
  for (int step = 0; step < options.large_steps && next < lengths.size(); ++step) {
    if (progress)
      progress("large batches", static_cast<uint64_t>(step), static_cast<uint64_t>(options.large_steps));
    std::vector<int64_t> batch;
    int64_t tokens = 0;
    for (; next < lengths.size() && tokens + lengths[next] <= options.large_batch_tokens; ++next) {
      batch.push_back(lengths[next]);
      tokens += lengths[next];
    }
    if (batch.empty()) {  // a sequence longer than a batch: skipped
      ++next;
      continue;
    }
    auto start = std::chrono::steady_clock::now();
    const selector::GroupProblem problem = large->problem(batch);
    result.pricing_s.push_back(seconds_since(start));
    start = std::chrono::steady_clock::now();
    const selector::GroupSchedule schedule = selector::solve_groups_greedy(problem);
    result.greedy_s.push_back(seconds_since(start));
    result.rounds.push_back(static_cast<double>(schedule.rounds.size()));
    result.imbalance.push_back(schedule.mean_imbalance());
    result.sequences.push_back(static_cast<double>(batch.size()));
  }

  if (options.simulate_job > 0) {
    if (progress) progress("simulating one grouped step", 0, 1);
    std::vector<int64_t> batch;
    int64_t tokens = 0;
    for (std::size_t i = 0; i < lengths.size() && tokens + lengths[i] <= options.large_batch_tokens; ++i) {
      batch.push_back(lengths[i]);
      tokens += lengths[i];
    }
    PARADYSE_CHECK(!batch.empty(), "the trace's first sequence is longer than a large batch");
    const std::unique_ptr<selector::GroupCosts> costs = costs_on(simulate_cluster, options.simulate_job);
    const selector::GroupSchedule schedule = selector::solve_groups_greedy(costs->problem(batch));
    const PlannedStep planned = plan_grouped_step(model, options.simulate_job, batch, schedule, *costs);
    sim::SimulationOptions simulation;
    simulation.max_flows_per_collective = options.max_flows_per_collective;
    steps::StepSimulator simulator(model, simulate_cluster, simulation);
    const auto start = std::chrono::steady_clock::now();
    const sim::SimulationResult simulated = simulator.simulate_grouped(planned.spec);
    result.simulate_wall_s = seconds_since(start);
    result.simulated_s = simulated.iteration_time_s;
    result.simulated_rounds = static_cast<int64_t>(planned.spec.rounds.size());
    result.simulated_kernels = static_cast<int64_t>(simulated.kernels);
    result.simulated_flows = static_cast<int64_t>(simulated.flows);
    result.analytic_collectives = static_cast<int64_t>(simulated.analytic_collectives);
  }
  return result;
}

}  // namespace paradyse::evaluation
