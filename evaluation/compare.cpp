#include "evaluation/compare.hpp"

#include <algorithm>
#include <map>
#include <memory>

#include "sim/simulator.hpp"

namespace paradyse::evaluation {

namespace {

// Gradient accumulation over each global batch: the optimizer step runs once, after its last trained
// sequence, so the others give back the optimizer step their engine time includes.
void accumulate(PolicyResult& result, const std::vector<double>& optimizer_s, int64_t global_batch) {
  for (std::size_t first = 0; first < result.sequences.size();
       first += static_cast<std::size_t>(global_batch)) {
    const std::size_t end = std::min(result.sequences.size(), first + static_cast<std::size_t>(global_batch));
    std::size_t last_trained = end;
    for (std::size_t i = first; i < end; ++i)
      if (result.sequences[i].fits) last_trained = i;
    if (last_trained == end) continue;
    ++result.steps;
    for (std::size_t i = first; i < last_trained; ++i)
      if (result.sequences[i].fits) result.sequences[i].seconds -= optimizer_s[i];
  }
}

void summarise(PolicyResult& result, const ModelSpec& model, const hw::ClusterSpec& cluster, int degree) {
  std::string previous_plan;
  for (const SequenceResult& s : result.sequences) {
    if (!s.fits) {
      ++result.oom_count;
      if (result.first_oom < 0) result.first_oom = s.index;
      continue;
    }
    ++result.trained;
    result.total_s += s.seconds;
    result.trained_tokens += static_cast<double>(s.tokens);
    result.model_flops += costmodel::model_flops(model, s.tokens, 1);
    if (result.first_oom < 0) result.max_len_before_oom = std::max(result.max_len_before_oom, s.tokens);
    if (!previous_plan.empty() && s.plan != previous_plan) ++result.plan_switches;
    previous_plan = s.plan;
  }
  if (result.total_s > 0) {
    result.tokens_per_second = result.trained_tokens / result.total_s;
    result.mfu = result.model_flops / (result.total_s * degree * cluster.gpu.bf16_flops_per_second);
  }
}

}  // namespace

StepEngine::StepEngine(const ModelSpec& model, const hw::ClusterSpec& cluster, int degree,
                       const std::string& engine, double grid_ratio)
    : model_(model), cluster_(cluster), degree_(degree), name_(engine), estimator_(model, cluster) {
  if (engine == "sim") {
    simulator_ = std::make_unique<sim::Simulator>(model, cluster);
    simulated_ = std::make_unique<SimulatedTimes>(*simulator_, degree, 1, grid_ratio);
  }
}

StepEngine::~StepEngine() = default;

StepEngine::Step StepEngine::step(const Plan& plan, int64_t tokens) {
  const costmodel::Estimate estimate =
      estimator_.estimate(plan, {.tokens = tokens, .degree = degree_, .batch = 1});
  Step step{estimate.padded_tokens, 0, estimate.memory.peak_bytes, estimate.fits, estimate.time.optimizer_s};
  if (step.fits)
    step.seconds = simulated_ ? simulated_->seconds(plan, estimate.padded_tokens) : estimate.time.total_s;
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

CompareResult run_compare(const std::vector<selector::Policy*>& policies, const std::vector<int64_t>& lengths,
                          StepEngine& engine, const Progress& progress, int error_samples,
                          int64_t global_batch) {
  PARADYSE_CHECK(global_batch >= 1, "a global batch of " + std::to_string(global_batch));
  CompareResult result;
  result.engine = engine.name();
  result.method = engine.method();
  const int64_t total = static_cast<int64_t>(lengths.size() * policies.size());
  int64_t done = 0;
  for (selector::Policy* policy : policies) {
    PolicyResult& out = result.policies.emplace_back();
    out.policy = policy->name();
    std::map<int64_t, selector::Decision> decided;  // by length, for policies that do not remember
    std::vector<double> optimizer_s(lengths.size(), 0.0);
    for (std::size_t i = 0; i < lengths.size(); ++i, ++done) {
      if (progress && done % 256 == 0) progress(done, total, out.policy);
      const int64_t tokens = lengths[i];
      const selector::Decision* decision = nullptr;
      selector::Decision fresh;
      if (policy->remembers()) {
        fresh = policy->decide(tokens);
        decision = &fresh;
      } else {
        auto found = decided.find(tokens);
        if (found == decided.end()) found = decided.emplace(tokens, policy->decide(tokens)).first;
        decision = &found->second;
      }
      SequenceResult& s = out.sequences.emplace_back();
      s.index = static_cast<int64_t>(i);
      s.tokens = tokens;
      s.padded_tokens = decision->padded_tokens;
      s.predicted_s = decision->predicted_s;
      s.predicted_peak_bytes = decision->predicted_peak_bytes;
      s.layer_switches = decision->switches;
      if (decision->plan.empty()) continue;
      s.plan = plan_name(decision->plan);
      const StepEngine::Step step = engine.step(decision->plan, tokens);
      s.padded_tokens = step.padded_tokens;
      s.peak_bytes = step.peak_bytes;
      s.fits = step.fits;
      s.seconds = step.seconds;
      optimizer_s[i] = step.optimizer_s;
    }
    accumulate(out, optimizer_s, global_batch);
    summarise(out, engine.model(), engine.cluster(), engine.degree());
  }
  if (progress) progress(total, total, "measuring the interpolation error");
  result.interpolation = engine.measure_error(error_samples);
  result.simulations = engine.simulations();
  return result;
}

}  // namespace paradyse::evaluation
