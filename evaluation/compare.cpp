#include "evaluation/compare.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <memory>

#include "steps/step_simulator.hpp"

namespace paradyse::evaluation {

namespace {

// Gradient accumulation over each global batch: the optimizer step runs once, after its last trained
// micro-batch, so the others give back the optimizer step their engine time includes.
void accumulate(PolicyResult& result, const std::vector<double>& optimizer_s) {
  for (std::size_t first = 0, end = 0; first < result.sequences.size(); first = end) {
    end = first;
    while (end < result.sequences.size() && result.sequences[end].step == result.sequences[first].step) ++end;
    std::size_t last_trained = end;
    for (std::size_t i = first; i < end; ++i)
      if (result.sequences[i].fits) last_trained = i;
    if (last_trained == end) continue;
    ++result.steps;
    for (std::size_t i = first; i < last_trained; ++i)
      if (result.sequences[i].fits) result.sequences[i].seconds -= optimizer_s[i];
  }
}

// The strategy of each layer of a plan_name() ("a", or "a,b:full,..."): a uniform plan's one name.
std::vector<std::string> layer_strategy_names(const std::string& plan) {
  std::vector<std::string> names;
  for (std::size_t start = 0; start < plan.size();) {
    const std::size_t end = std::min(plan.find(',', start), plan.size());
    const std::string layer = plan.substr(start, end - start);
    const std::string name = layer.substr(0, layer.find(':'));
    if (find_strategy(name) != nullptr) names.push_back(name);
    start = end + 1;
  }
  return names;
}

}  // namespace

void summarise(PolicyResult& result, const hw::ClusterSpec& cluster, int degree) {
  std::string previous_plan;
  std::map<std::string, double> strategy_s;
  for (const SequenceResult& s : result.sequences) {
    if (!s.fits) {
      ++result.oom_count;
      result.oom_tokens += static_cast<double>(s.tokens);
      if (result.first_oom < 0) result.first_oom = s.index;
      continue;
    }
    ++result.trained;
    result.total_s += s.seconds;
    result.host_bound_s += s.host_bound_s;
    result.trained_tokens += static_cast<double>(s.tokens);
    result.model_flops += s.model_flops;
    if (result.first_oom < 0) result.max_len_before_oom = std::max(result.max_len_before_oom, s.tokens);
    if (!previous_plan.empty() && s.plan != previous_plan) ++result.plan_switches;
    previous_plan = s.plan;
    const std::vector<std::string> layers = layer_strategy_names(s.plan);
    for (const std::string& name : layers) strategy_s[name] += s.seconds / static_cast<double>(layers.size());
  }
  if (result.total_s > 0) {
    for (const auto& [name, seconds] : strategy_s)
      result.strategy_time_shares[name] = seconds / result.total_s;
    result.tokens_per_second = result.trained_tokens / result.total_s;
    result.mfu = result.model_flops / (result.total_s * degree * cluster.gpu.bf16_flops_per_second);
  }
}

StepEngine::StepEngine(const ModelSpec& model, const hw::ClusterSpec& cluster, int degree,
                       const std::string& engine, double grid_ratio, int jobs)
    : model_(model), cluster_(cluster), degree_(degree), name_(engine), estimator_(model, cluster) {
  if (engine == "sim") {
    simulator_ = std::make_unique<steps::StepSimulator>(model, cluster);
    simulated_ = std::make_unique<SimulatedTimes>(*simulator_, degree, 1, grid_ratio, jobs);
  }
}

void StepEngine::prefetch(const std::function<void()>& body,
                          const std::function<void(std::size_t, std::size_t)>& progress) {
  if (simulated_) simulated_->prefetch(body, progress);
}

StepEngine::~StepEngine() = default;

StepEngine::Step StepEngine::step(const Plan& plan, const MicroBatch& micro_batch) {
  const steps::Estimate estimate =
      estimator_.estimate(plan, {.degree = degree_, .batch = 1, .documents = micro_batch.documents});
  Step step{.padded_tokens = estimate.padded_tokens,
            .peak_bytes = estimate.memory.peak_bytes,
            .fits = estimate.fits,
            .optimizer_s = estimate.time.optimizer_s};
  if (!step.fits) return step;
  IterationTime time{estimate.time.total_s, estimate.time.host_bound_s};
  if (simulated_ && !micro_batch.packed()) {
    time = simulated_->time(plan, estimate.padded_tokens);
  } else if (simulated_) {
    const steps::Estimate sequence =
        estimator_.estimate(plan, {.tokens = estimate.padded_tokens, .degree = degree_, .batch = 1});
    time = simulated_->time(plan, micro_batch.cost_key(degree_, model_.causal),
                            estimate.time.total_s / sequence.time.total_s);
  }
  step.seconds = time.seconds;
  step.host_bound_s = time.host_bound_s;
  return step;
}

std::string StepEngine::method() const {
  if (!simulated_) return "analytic: every (plan, length) estimated from its traced programs";
  return "simulated: " + simulated_->method() + "; memory from the fold of each plan's allocations";
}

std::optional<PercentageErrors> StepEngine::measure_error(int samples) {
  if (!simulated_) return std::nullopt;
  return simulated_->measure_error(samples);
}

int64_t StepEngine::simulations() const {
  return simulated_ ? simulated_->simulations() : 0;
}

CompareResult run_compare(const std::vector<selector::Policy*>& policies,
                          const traces::TrainingSchedule& schedule, StepEngine& engine,
                          const Progress& progress, int error_samples) {
  PARADYSE_CHECK(schedule.step_of.size() == schedule.micro_batches.size(),
                 "a schedule's steps and micro-batches");
  CompareResult result;
  result.engine = engine.name();
  const std::size_t count = schedule.micro_batches.size();
  const int64_t total = static_cast<int64_t>(count * policies.size());
  int64_t done = 0;
  for (selector::Policy* policy : policies) {
    PolicyResult& out = result.policies.emplace_back();
    out.policy = policy->name();
    // Every micro-batch's decision first, so that the simulations they need run together. Policies
    // that do not remember decide once per documents.
    std::map<std::vector<int64_t>, selector::Decision> decided;
    std::vector<selector::Decision> fresh;
    std::vector<const selector::Decision*> decisions(count);
    if (policy->remembers()) fresh.reserve(count);
    for (std::size_t i = 0; i < count; ++i, ++done) {
      if (progress && done % 256 == 0) progress(done, total, out.policy);
      const MicroBatch micro_batch{schedule.micro_batches[i]};
      if (policy->remembers()) {
        decisions[i] = &fresh.emplace_back(policy->decide(micro_batch));
        continue;
      }
      auto found = decided.find(micro_batch.documents);
      if (found == decided.end())
        found = decided.emplace(micro_batch.documents, policy->decide(micro_batch)).first;
      decisions[i] = &found->second;
    }
    engine.prefetch(
        [&] {
          for (std::size_t i = 0; i < count; ++i)
            if (!decisions[i]->plan.empty())
              engine.step(decisions[i]->plan, MicroBatch{schedule.micro_batches[i]});
        },
        [&](std::size_t simulated, std::size_t simulations) {
          if (progress)
            progress(done, total, fmt::format("{}: simulating {}/{}", out.policy, simulated, simulations));
        });
    std::vector<double> optimizer_s(count, 0.0);
    for (std::size_t i = 0; i < count; ++i) {
      const MicroBatch micro_batch{schedule.micro_batches[i]};
      const selector::Decision* decision = decisions[i];
      SequenceResult& s = out.sequences.emplace_back();
      s.index = static_cast<int64_t>(i);
      s.step = schedule.step_of[i];
      s.tokens = micro_batch.tokens();
      s.documents = static_cast<int64_t>(micro_batch.documents.size());
      s.model_flops = steps::model_flops(engine.model(), micro_batch, 1);
      s.padded_tokens = decision->padded_tokens;
      s.predicted_s = decision->predicted_s;
      s.predicted_peak_bytes = decision->predicted_peak_bytes;
      s.layer_switches = decision->switches;
      if (decision->plan.empty()) continue;
      s.plan = plan_name(decision->plan);
      const StepEngine::Step step = engine.step(decision->plan, micro_batch);
      s.padded_tokens = step.padded_tokens;
      s.peak_bytes = step.peak_bytes;
      s.fits = step.fits;
      s.seconds = step.seconds;
      s.host_bound_s = step.host_bound_s;
      optimizer_s[i] = step.optimizer_s;
    }
    accumulate(out, optimizer_s);
    summarise(out, engine.cluster(), engine.degree());
  }
  if (progress) progress(total, total, "measuring the interpolation error");
  result.interpolation = engine.measure_error(error_samples);
  result.method = engine.method();
  result.simulations = engine.simulations();
  return result;
}

}  // namespace paradyse::evaluation
