#include "evaluation/compare_job.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "common/limits.hpp"
#include "evaluation/group_compare.hpp"
#include "evaluation/micro_batch_budgets.hpp"
#include "selector/group_costs.hpp"
#include "traces/trace.hpp"

namespace paradyse::evaluation {

namespace {

// The job's steps, a run of whole steps at a time: its micro-batches, and the same steps packed into
// micro-batches of each of `budgets` (a step's sequences do not depend on how it is packed, so the
// schedules close their steps together).
using ChunkBody =
    std::function<void(const traces::TrainingSchedule&, const std::vector<traces::TrainingSchedule>&)>;
void for_each_chunk(const CheckedCompareJob& job, const std::vector<int64_t>& budgets,
                    const ChunkBody& body) {
  traces::ScheduleBuilder builder = job.schedule_builder();
  std::vector<traces::ScheduleBuilder> at_budgets;
  for (const int64_t budget : budgets) at_budgets.push_back(job.schedule_builder(budget));
  std::vector<traces::TrainingSchedule> taken(budgets.size());
  const auto take = [&] {
    for (std::size_t b = 0; b < budgets.size(); ++b) taken[b] = at_budgets[b].take();
    body(builder.take(), taken);
  };
  job.trace.prepared->for_each([&](int64_t length) {
    builder.add(length);
    for (traces::ScheduleBuilder& b : at_budgets) b.add(length);
    if (static_cast<int64_t>(builder.ready()) >= job.chunk_micro_batches) take();
  });
  builder.close();
  for (traces::ScheduleBuilder& b : at_budgets) b.close();
  if (builder.ready() > 0) take();
}

// A length flag whose "0" means none.
int64_t length_or_zero(const std::string& text, const std::string& flag) {
  return text == "0" ? 0 : parse_length(text, flag);
}

}  // namespace

void check_engine(const std::string& engine) {
  if (engine != "sim" && engine != "analytic")
    throw InputError("--engine", 0, "", "expected sim or analytic, got '" + engine + "'");
}

JobTrace load_job_trace(const CompareJob& job) {
  traces::PrepareOptions prepare;
  prepare.order = traces::parse_order(job.order);
  prepare.seed = job.seed;
  prepare.max_len = length_or_zero(job.max_len, "--max-len");
  prepare.over = traces::parse_over_rule(job.over);
  if (job.limit < 0) throw InputError("--limit", 0, "", "expected a positive count or 0 (all)");
  prepare.limit = job.limit;
  if (!(job.sample > 0 && job.sample <= 1))
    throw InputError("--sample", 0, "", fmt::format("expected a fraction in (0, 1], got {}", job.sample));
  prepare.sample = job.sample;
  JobTrace out;
  if (job.lengths.empty()) {
    out.trace = std::make_shared<const traces::TraceSource>(
        traces::TraceSource::open(job.trace, {job.column, job.field}));
  } else {
    traces::Trace grid{.name = "length grid",
                       .description = fmt::format("{} lengths from {} to {}", job.lengths.size(),
                                                  job.lengths.front(), job.lengths.back()),
                       .lengths = job.lengths};
    out.trace = std::make_shared<const traces::TraceSource>(std::move(grid));
  }
  out.prepared = std::make_shared<const traces::PreparedLengths>(out.trace, prepare);
  out.sorted = prepare.order == traces::Order::sorted;
  return out;
}

CheckedCompareJob check_compare_job(const CompareJob& job) {
  check_engine(job.engine);
  if (job.grid_ratio != 0 && !(job.grid_ratio > 1 && job.grid_ratio <= 2))
    throw InputError(
        "--grid-ratio", 0, "",
        fmt::format("expected 0 (simulate every length) or a ratio in (1, 2], got {}", job.grid_ratio));
  if (job.policies.batch != 1)
    throw InputError(
        "--batch", 0, "",
        "compare trains one sequence per micro-batch, as the paper does: expected 1 (for several "
        "sequences a step, --global-batch)");
  if (job.global_batch < 1 || job.global_batch > kMaxMicroBatches)
    throw InputError("--global-batch", 0, "",
                     fmt::format("expected between 1 and {} sequences a step, got {}", kMaxMicroBatches,
                                 job.global_batch));
  PARADYSE_CHECK(job.chunk_micro_batches >= 1, "a positive chunk of micro-batches");
  CheckedCompareJob checked;
  checked.global_batch = job.global_batch;
  checked.chunk_micro_batches = job.chunk_micro_batches;
  checked.global_batch_tokens = length_or_zero(job.global_batch_tokens, "--global-batch-tokens");
  checked.micro_batch_tokens = length_or_zero(job.micro_batch_tokens, "--micro-batch-tokens");
  const int64_t global_batch_tokens = checked.global_batch_tokens;
  if ((global_batch_tokens > 0) != (checked.micro_batch_tokens > 0))
    throw InputError(global_batch_tokens > 0 ? "--micro-batch-tokens" : "--global-batch-tokens", 0, "",
                     "packed training needs both --global-batch-tokens and --micro-batch-tokens");
  if (global_batch_tokens > 0 && job.global_batch != 1)
    throw InputError("--global-batch", 0, "",
                     "expected 1 with --global-batch-tokens: a global batch is counted in sequences or in "
                     "tokens, not both");
  checked.group_policies = parse_group_policies(job.group_policies);
  if (!checked.group_policies.empty() && global_batch_tokens == 0)
    throw InputError("--group-policies", 0, "",
                     "group policies assign a global batch's sequences to groups of GPUs: they need packed "
                     "training (--global-batch-tokens and --micro-batch-tokens)");
  checked.trace = load_job_trace(job);
  checked.set = job.policies.build(job.machine, job.cluster ? &*job.cluster : nullptr);
  const PolicySet& set = checked.set;
  checked.shard_degree = parse_shard_group(job.shard_group, set.cluster, set.degree);
  checked.gradient_reduce_dtype = parse_gradient_reduce_dtype(job.gradient_reduce_dtype);
  if (!checked.group_policies.empty()) {
    try {
      selector::check_group_job(set.model, set.cluster, set.degree, checked.shard_degree);
    } catch (const InputError& e) {
      throw InputError(
          "--group-policies", 0, "",
          "groups of the job's " + std::to_string(set.degree) + " GPUs (--degree): " + e.message());
    }
    selector::check_group_degrees(job.group_sizes, set.degree);
  } else if (!job.group_sizes.empty()) {
    throw InputError("--group-sizes", 0, "", "group sizes are for --group-policies, and there are none");
  } else if (job.shard_group != "job") {
    throw InputError("--shard-group", 0, "", "a shard group is for --group-policies, and there are none");
  } else if (job.gradient_reduce_dtype != "bf16") {
    throw InputError(
        "--gradient-reduce-dtype", 0, "",
        "the type of the grouped step's gradient reduction is for --group-policies, and there are "
        "none (the static strategies reduce in bf16)");
  }
  checked.quantum = SequenceLayout::required_multiple(set.degree, set.model.causal);
  if (!job.tune_budgets.empty()) {
    if (global_batch_tokens == 0)
      throw InputError("--tune-statics", 0, "",
                       "a static's micro-batch budget is tuned in packed training (--global-batch-tokens and "
                       "--micro-batch-tokens)");
    if (std::none_of(set.policies.begin(), set.policies.end(),
                     [](const auto& policy) { return policy->name().starts_with("static:"); }))
      throw InputError("--tune-statics", 0, "", "the run has no static policy to tune (--policy)");
    checked.tune_budgets = parse_budgets(job.tune_budgets, "--tune-statics", checked.micro_batch_tokens,
                                         global_batch_tokens, checked.quantum);
  }
  // Unpacked, a micro-batch is a sequence and nothing can fail. Packed, every step is laid out once,
  // for its errors (a sequence longer than a global batch) and its sizes.
  if (checked.global_batch_tokens == 0) {
    checked.micro_batches = checked.trace.prepared->sequences();
    return checked;
  }
  for_each_chunk(checked, {}, [&](const traces::TrainingSchedule& steps, const auto&) {
    checked.micro_batches += static_cast<int64_t>(steps.micro_batches.size());
    checked.largest_step_tokens = std::max(checked.largest_step_tokens, largest_step_tokens(steps));
  });
  return checked;
}

traces::ScheduleBuilder CheckedCompareJob::schedule_builder(int64_t micro_batch_budget) const {
  if (global_batch_tokens == 0) return traces::ScheduleBuilder::unpacked(global_batch);
  return traces::ScheduleBuilder::packed(
      {.global_batch_tokens = global_batch_tokens,
       .micro_batch_tokens = micro_batch_budget > 0 ? micro_batch_budget : micro_batch_tokens,
       .quantum = quantum});
}

CompareJobResult run_compare_job(const CompareJob& job, const Progress& progress, SequenceSink* sink) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const CheckedCompareJob checked = check_compare_job(job);
  const PolicySet& set = checked.set;
  const std::vector<GroupPolicy>& group_policies = checked.group_policies;

  StepEngine engine(set.model, set.cluster, set.degree, job.engine, job.grid_ratio, job.jobs);
  // Priced before anything runs: a group policy that can train nothing is an input error.
  std::vector<std::unique_ptr<selector::GroupCosts>> costs;
  for (const GroupPolicy& group_policy : group_policies)
    costs.push_back(group_costs(group_policy, engine,
                                {.recompute_choices = job.policies.recompute_choices,
                                 .degrees = job.group_sizes,
                                 .shard_degree = checked.shard_degree,
                                 .gradient_reduce_dtype = checked.gradient_reduce_dtype},
                                checked.largest_step_tokens));
  std::vector<selector::Policy*> policies;
  std::vector<std::string> names;
  for (auto& policy : set.policies) {
    policies.push_back(policy.get());
    names.push_back(policy->name());
  }
  for (const GroupPolicy& group_policy : group_policies) names.push_back(group_policy.name);
  // The statics again at each budget to tune, after every other policy.
  std::vector<selector::Policy*> statics;
  for (selector::Policy* policy : policies)
    if (policy->name().starts_with("static:")) statics.push_back(policy);
  const std::size_t first_tuned = names.size();
  for (const int64_t budget : checked.tune_budgets)
    for (const selector::Policy* policy : statics)
      names.push_back(budget_variant_name(policy->name(), budget));
  CompareRecorder recorder(names, sink);
  PolicyRuns policy_runs(policies);
  std::vector<GroupPolicyRun> group_runs;
  for (std::size_t i = 0; i < group_policies.size(); ++i)
    group_runs.emplace_back(group_policies[i], engine, *costs[i], recorder, policies.size() + i);
  std::vector<std::unique_ptr<PolicyRuns>> tuned_runs;
  for (std::size_t b = 0; b < checked.tune_budgets.size(); ++b)
    tuned_runs.push_back(std::make_unique<PolicyRuns>(statics, first_tuned + b * statics.size()));

  // Progress over every policy's micro-batches (a group policy's counted by steps, and a tuned
  // static's by its own micro-batches, scaled).
  const int64_t total = checked.micro_batches * static_cast<int64_t>(names.size());
  const auto run_chunk = [&](const traces::TrainingSchedule& chunk,
                             const std::vector<traces::TrainingSchedule>& at_budgets) {
    const int64_t before = chunk.first_micro_batch * static_cast<int64_t>(names.size());
    const int64_t size = static_cast<int64_t>(chunk.micro_batches.size());
    policy_runs.run(chunk, engine, recorder, [&](int64_t done, int64_t, const std::string& what) {
      if (progress) progress(before + done, total, what);
    });
    for (std::size_t g = 0; g < group_runs.size(); ++g)
      group_runs[g].run(chunk, [&](int64_t done, int64_t steps, const std::string& what) {
        if (progress)
          progress(before + size * static_cast<int64_t>(policies.size() + g) +
                       size * done / std::max<int64_t>(steps, 1),
                   total, what);
      });
    const auto statics_count = static_cast<int64_t>(statics.size());
    for (std::size_t b = 0; b < tuned_runs.size(); ++b)
      tuned_runs[b]->run(at_budgets[b], engine, recorder,
                         [&](int64_t done, int64_t all, const std::string& what) {
                           if (progress)
                             progress(before + size * static_cast<int64_t>(first_tuned + b * statics.size()) +
                                          size * statics_count * done / std::max<int64_t>(all, 1),
                                      total, what);
                         });
    recorder.end_chunk();
  };
  for_each_chunk(checked, checked.tune_budgets, run_chunk);
  for (GroupPolicyRun& run : group_runs) run.finish();

  CompareJobResult out{recorder.finish(set.cluster, set.degree), {}};
  if (progress) progress(total, total, "measuring the interpolation error");
  finish_engine_figures(out.result, engine, 24);
  RunDescription& description = out.description;
  description.model = set.model.name;
  description.cluster = set.cluster.name;
  description.framework = set.cluster.framework;
  description.attention_implementation = set.cluster.attention_implementation;
  description.degree = set.degree;
  if (!group_policies.empty()) {
    description.shard_degree = checked.shard_degree;
    description.gradient_reduce_dtype = job.gradient_reduce_dtype;
  }
  description.global_batch = job.global_batch;
  description.global_batch_tokens = checked.global_batch_tokens;
  description.micro_batch_tokens = checked.micro_batch_tokens;
  description.trace = checked.trace.trace->name();
  description.trace_about = checked.trace.trace->description();
  description.preparation = checked.trace.prepared->description();
  description.sorted = checked.trace.sorted;
  description.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

}  // namespace paradyse::evaluation
