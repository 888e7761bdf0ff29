#include "evaluation/group_compare.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

#include "common/errors.hpp"
#include "costmodel/program_cost.hpp"
#include "selector/group_costs.hpp"
#include "steps/step_simulator.hpp"
#include "strategies/grouped_step.hpp"

namespace paradyse::evaluation {
namespace {

// The schedule of the degree whose schedule is fastest, when every group must have one degree.
selector::GroupSchedule solve(const GroupPolicy& policy, const selector::GroupProblem& problem) {
  if (!policy.one_degree) return selector::solve_groups_greedy(problem);
  selector::GroupSchedule best;
  best.seconds = std::numeric_limits<double>::infinity();
  std::size_t best_unplaced = problem.tokens.size() + 1;
  for (std::size_t i = 0; i < problem.degrees.size(); ++i) {
    selector::GroupProblem one = problem;
    one.degrees = {problem.degrees[i]};
    one.capacity_tokens = {problem.capacity_tokens[i]};
    if (!problem.micro_batch_s.empty()) one.micro_batch_s = {problem.micro_batch_s[i]};
    if (!problem.packing_tokens.empty()) one.packing_tokens = {problem.packing_tokens[i]};
    if (!problem.hidden_s.empty()) one.hidden_s = {problem.hidden_s[i]};
    for (std::vector<double>& row : one.seconds) row = {row[i]};
    selector::GroupSchedule schedule = selector::solve_groups_greedy(one);
    // Fewest sequences left out first, then the fastest.
    if (schedule.unplaced.size() < best_unplaced ||
        (schedule.unplaced.size() == best_unplaced && schedule.seconds < best.seconds)) {
      best_unplaced = schedule.unplaced.size();
      best = std::move(schedule);
    }
  }
  return best;
}

// "4x2,8 | 8": each round's groups by degree, a run of equal ones as count x degree.
std::string layout_text(const selector::GroupSchedule& schedule) {
  std::string text;
  for (const selector::SolvedRound& round : schedule.rounds) {
    if (!text.empty()) text += " | ";
    std::vector<int> degrees;
    for (const selector::GroupInRound& g : round.groups) degrees.push_back(g.degree);
    std::sort(degrees.rbegin(), degrees.rend());
    for (std::size_t i = 0; i < degrees.size();) {
      std::size_t j = i;
      while (j < degrees.size() && degrees[j] == degrees[i]) ++j;
      if (i > 0) text += ",";
      text += (j - i > 1 ? std::to_string(j - i) + "x" : "") + std::to_string(degrees[i]);
      i = j;
    }
  }
  return text;
}

// The analytic engine's time of a grouped step: each rank's program priced phase by phase, the
// slowest rank; its memory: the highest of the ranks' live bytes over the static terms.
struct Timed {
  double seconds = 0, host_bound_s = 0, peak_bytes = 0;  // host_bound_s: the mean over ranks
  double host_peak_bytes = 0;                            // offloaded activations in host memory
  bool fits = false;
};
Timed analytic(const GroupedStepSpec& spec, const hw::ClusterSpec& cluster, int job) {
  const costmodel::OpTimer timer(cluster, job);
  ModelSpec model = *spec.model;
  model.num_layers = spec.num_layers;
  const double static_bytes = steps::static_memory_bytes(model, spec.shard_degree_of(job), WeightLayout::job);
  Timed timed;
  for (int rank = 0; rank < job; ++rank) {
    const costmodel::ProgramPrice price = costmodel::price_program(
        trace_grouped_step(spec, rank, job), timer, static_bytes, cluster.gpu.allocator_fragmentation);
    timed.seconds = std::max(timed.seconds, price.seconds);
    timed.host_bound_s += price.host_bound_s / job;
    timed.peak_bytes = std::max(timed.peak_bytes, price.peak_bytes);
    timed.host_peak_bytes = std::max(timed.host_peak_bytes, price.host_peak_bytes);
  }
  timed.fits = cluster.holds(timed.peak_bytes, timed.host_peak_bytes);
  return timed;
}

}  // namespace

PlannedStep plan_grouped_step(const ModelSpec& model, int job, const std::vector<int64_t>& lengths,
                              const selector::GroupSchedule& schedule, selector::GroupCosts& costs) {
  PlannedStep planned;
  planned.spec.model = &model;
  planned.spec.num_layers = static_cast<int>(model.num_layers);
  planned.spec.shard_degree = costs.shard_degree();
  planned.spec.gradient_reduce_dtype = costs.gradient_reduce_dtype();
  for (const selector::SolvedRound& round : schedule.rounds) {
    Round groups;
    int covered = 0;
    const auto idle_until = [&](int rank) {  // ranks the round leaves without work
      StepSpec idle;
      idle.model = &model;
      for (; covered < rank; ++covered) groups.push_back({covered, 1, idle});
    };
    for (const selector::GroupInRound& g : round.groups) {
      idle_until(g.first_rank);
      std::vector<int64_t> documents;
      for (const std::size_t s : g.sequences) documents.push_back(lengths[s]);
      const MicroBatch micro_batch{documents};
      const selector::GroupCosts::Price priced = costs.price(micro_batch, g.degree);
      planned.fits = planned.fits && priced.fits;
      if (!priced.prefetch && (planned.spec.rounds_without_prefetch.empty() ||
                               planned.spec.rounds_without_prefetch.back() != planned.spec.rounds.size()))
        planned.spec.rounds_without_prefetch.push_back(planned.spec.rounds.size());
      StepSpec micro;
      micro.model = &model;
      const std::vector<int64_t> padded = micro_batch.padded_documents(g.degree, model.causal);
      for (const int64_t length : padded) micro.tokens += length;
      if (padded.size() > 1) micro.documents = padded;
      micro.plan = priced.plan;
      groups.push_back({g.first_rank, g.degree, micro});
      covered = g.first_rank + g.degree;
      planned.tokens += micro_batch.tokens();
      planned.padded_tokens += micro.tokens;
      planned.documents += static_cast<int64_t>(documents.size());
      planned.model_flops += steps::model_flops(model, micro_batch, 1);
      ++planned.micro_batches;
    }
    idle_until(job);
    planned.spec.rounds.push_back(std::move(groups));
  }
  return planned;
}

std::vector<GroupPolicy> parse_group_policies(const std::string& names) {
  std::vector<GroupPolicy> policies;
  std::size_t start = 0;
  while (start < names.size()) {
    const std::size_t comma = std::min(names.find(',', start), names.size());
    const std::string name = names.substr(start, comma - start);
    if (name == "flexsp")
      policies.push_back({name, "static:ulysses_z", false});
    else if (name == "dp-groups")
      policies.push_back({name, selector::GroupCosts::kSwitching, true});
    else if (name == "groups")
      policies.push_back({name, selector::GroupCosts::kSwitching, false});
    else
      throw InputError("--group-policies", 0, "",
                       "expected flexsp, dp-groups or groups, comma-separated, got '" + name + "'");
    start = comma + 1;
  }
  return policies;
}

std::unique_ptr<selector::GroupCosts> group_costs(const GroupPolicy& policy, const StepEngine& engine,
                                                  const selector::GroupPricingOptions& pricing,
                                                  int64_t longest) {
  try {
    return std::make_unique<selector::GroupCosts>(engine.model(), engine.cluster(), engine.degree(),
                                                  policy.pricing, longest, pricing);
  } catch (const InputError& e) {
    if (!e.file().empty()) throw;  // names its own flag
    throw InputError("--group-policies", 0, "", policy.name + ": " + e.message());
  }
}

int64_t largest_step_tokens(const traces::TrainingSchedule& schedule) {
  int64_t largest = 1;
  for (std::size_t i = 0, end = 0; i < schedule.micro_batches.size(); i = end) {
    int64_t tokens = 0;
    for (end = i; end < schedule.micro_batches.size() && schedule.step_of[end] == schedule.step_of[i]; ++end)
      for (const int64_t length : schedule.micro_batches[end]) tokens += length;
    largest = std::max(largest, tokens);
  }
  return largest;
}

PolicyResult run_group_policy(const GroupPolicy& policy, const traces::TrainingSchedule& schedule,
                              StepEngine& engine, const selector::GroupPricingOptions& pricing,
                              SequenceSink* sink) {
  const std::unique_ptr<selector::GroupCosts> costs =
      group_costs(policy, engine, pricing, largest_step_tokens(schedule));
  CompareRecorder recorder({policy.name}, sink);
  GroupPolicyRun run(policy, engine, *costs, recorder, 0);
  run.run(schedule);
  run.finish();
  return std::move(recorder.finish(engine.cluster(), engine.degree()).policies.front());
}

GroupPolicyRun::GroupPolicyRun(const GroupPolicy& policy, StepEngine& engine, selector::GroupCosts& costs,
                               CompareRecorder& recorder, std::size_t index)
    : policy_(policy), engine_(&engine), costs_(&costs), recorder_(&recorder), index_(index) {}

void GroupPolicyRun::run(const traces::TrainingSchedule& chunk, const Progress& progress) {
  const ModelSpec& model = engine_->model();
  const int job = engine_->degree();
  PolicyResult& totals = recorder_->policy(index_);
  int64_t done = 0;
  for (std::size_t next = 0; next < chunk.micro_batches.size(); ++done) {
    if (progress) progress(done, chunk.steps, policy_.name);
    const int64_t step = chunk.step_of[next];
    std::vector<int64_t> lengths;
    for (; next < chunk.micro_batches.size() && chunk.step_of[next] == step; ++next)
      lengths.insert(lengths.end(), chunk.micro_batches[next].begin(), chunk.micro_batches[next].end());
    const selector::GroupProblem problem = costs_->problem(lengths);
    const auto start = std::chrono::steady_clock::now();
    const selector::GroupSchedule solved = solve(policy_, problem);
    const double solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    totals.solve_s += solve_s;

    if (!solved.unplaced.empty()) {  // out of memory on any group: a result of their own
      SequenceResult oom{.index = results_++, .step = step};
      for (const std::size_t s : solved.unplaced) {
        oom.tokens += lengths[s];
        oom.padded_tokens += lengths[s];
      }
      oom.documents = static_cast<int64_t>(solved.unplaced.size());
      recorder_->add(index_, oom);
    }
    if (solved.rounds.empty()) continue;

    const PlannedStep planned = plan_grouped_step(model, job, lengths, solved, *costs_);
    const GroupedStepSpec& spec = planned.spec;
    SequenceResult result{.index = results_++,
                          .step = step,
                          .tokens = planned.tokens,
                          .documents = planned.documents,
                          .padded_tokens = planned.padded_tokens,
                          .model_flops = planned.model_flops,
                          .plan = layout_text(solved),
                          .predicted_s = solved.seconds,
                          .lower_bound_s = solved.lower_bound_s,
                          .imbalance = solved.mean_imbalance(),
                          .solve_s = solve_s};
    totals.group_micro_batches += planned.micro_batches;
    totals.rounds += static_cast<int64_t>(solved.rounds.size());
    totals.solver_predicted_s += solved.seconds;
    totals.solver_lower_bound_s += solved.lower_bound_s;
    imbalance_sum_ += solved.mean_imbalance();
    ++solved_steps_;
    if (planned.fits) {  // else a group's micro-batch fits no plan: the step is out of memory
      if (steps::StepSimulator* simulator = engine_->simulator()) {
        const sim::SimulationResult simulated = simulator->simulate_grouped(spec);
        result.seconds = simulated.iteration_time_s;
        result.host_bound_s = simulated.mean_host_bound_s();
        result.peak_bytes = simulated.peak_memory_bytes;
        result.fits = !simulated.oom;
      } else {
        const Timed timed = analytic(spec, engine_->cluster(), job);
        result.seconds = timed.seconds;
        result.host_bound_s = timed.host_bound_s;
        result.peak_bytes = timed.peak_bytes;
        result.fits = timed.fits;
      }
      if (!result.fits) result.seconds = result.host_bound_s = 0;
    }
    recorder_->add(index_, result);
  }
}

void GroupPolicyRun::finish() {
  if (solved_steps_ > 0)
    recorder_->policy(index_).mean_imbalance = imbalance_sum_ / static_cast<double>(solved_steps_);
}

}  // namespace paradyse::evaluation
