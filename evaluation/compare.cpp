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

// A policy's decision for every micro-batch of a schedule, made a few at a time (decide_some), so
// that the next policy's can be made while this one's simulations run. Policies that do not remember
// decide once per documents.
class PolicyDecisions {
 public:
  PolicyDecisions(selector::Policy& policy, const traces::TrainingSchedule& schedule)
      : policy_(&policy), schedule_(&schedule), decisions_(schedule.micro_batches.size()) {
    if (policy.remembers()) fresh_.reserve(decisions_.size());  // the pointers into it stay valid
  }
  // Decides up to `count` more; false once every micro-batch is decided.
  bool decide_some(std::size_t count) {
    for (const std::size_t end = std::min(decisions_.size(), next_ + count); next_ < end; ++next_) {
      const MicroBatch micro_batch{schedule_->micro_batches[next_]};
      if (policy_->remembers()) {
        decisions_[next_] = &fresh_.emplace_back(policy_->decide(micro_batch));
        continue;
      }
      auto found = decided_.find(micro_batch.documents);
      if (found == decided_.end())
        found = decided_.emplace(micro_batch.documents, policy_->decide(micro_batch)).first;
      decisions_[next_] = &found->second;
    }
    return next_ < decisions_.size();
  }
  void release() {
    decided_.clear();
    fresh_ = {};
    decisions_ = {};
  }
  std::size_t decided() const { return next_; }
  const selector::Decision& operator[](std::size_t i) const { return *decisions_[i]; }

 private:
  selector::Policy* policy_;
  const traces::TrainingSchedule* schedule_;
  std::map<std::vector<int64_t>, selector::Decision> decided_;
  std::vector<selector::Decision> fresh_;
  std::vector<const selector::Decision*> decisions_;
  std::size_t next_ = 0;
};

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
                          const std::function<void(std::size_t, std::size_t)>& progress,
                          const std::function<bool()>& idle) {
  if (simulated_) simulated_->prefetch(body, progress, idle);
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
  // Each policy's decisions, then the simulations they need, during which the next policy decides.
  std::vector<PolicyDecisions> decisions;
  for (selector::Policy* policy : policies) decisions.emplace_back(*policy, schedule);
  const auto report = [&] {
    if (!progress) return;
    int64_t decided = 0;
    for (const PolicyDecisions& d : decisions) decided += static_cast<int64_t>(d.decided());
    progress(decided, total, "deciding");
  };
  constexpr std::size_t kDecisionsAtOnce = 256;
  for (std::size_t p = 0; p < policies.size(); ++p) {
    PolicyResult& out = result.policies.emplace_back();
    out.policy = policies[p]->name();
    PolicyDecisions& decided = decisions[p];
    while (decided.decide_some(kDecisionsAtOnce)) report();
    engine.prefetch(
        [&] {
          for (std::size_t i = 0; i < count; ++i)
            if (!decided[i].plan.empty()) engine.step(decided[i].plan, MicroBatch{schedule.micro_batches[i]});
        },
        [&](std::size_t simulated, std::size_t simulations) {
          if (progress)
            progress(static_cast<int64_t>(p * count), total,
                     fmt::format("{}: simulating {}/{}", out.policy, simulated, simulations));
        },
        [&] { return p + 1 < policies.size() && decisions[p + 1].decide_some(kDecisionsAtOnce); });
    std::vector<double> optimizer_s(count, 0.0);
    for (std::size_t i = 0; i < count; ++i) {
      const MicroBatch micro_batch{schedule.micro_batches[i]};
      const selector::Decision* decision = &decided[i];
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
    decided.release();
  }
  if (progress) progress(total, total, "measuring the interpolation error");
  result.interpolation = engine.measure_error(error_samples);
  result.method = engine.method();
  result.simulations = engine.simulations();
  return result;
}

}  // namespace paradyse::evaluation
