#include "evaluation/compare.hpp"

#include <fmt/core.h>

#include <boost/container_hash/hash.hpp>

#include <algorithm>
#include <memory>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "steps/step_simulator.hpp"

namespace paradyse::evaluation {

namespace {

// Gradient accumulation over each global batch: the optimizer step runs once, after its last trained
// micro-batch, so the others give back the optimizer step their engine time includes.
void accumulate(std::vector<SequenceResult>& results, const std::vector<double>& optimizer_s) {
  for (std::size_t first = 0, end = 0; first < results.size(); first = end) {
    end = first;
    while (end < results.size() && results[end].step == results[first].step) ++end;
    std::size_t last_trained = end;
    for (std::size_t i = first; i < end; ++i)
      if (results[i].fits) last_trained = i;
    for (std::size_t i = first; i < last_trained && last_trained < end; ++i)
      if (results[i].fits) results[i].seconds -= optimizer_s[i];
  }
}

}  // namespace

// A policy's decision for every micro-batch of a run, a chunk of steps at a time (begin_chunk), made a
// few at a time (decide_some), so that the next policy's can be made while this one's simulations run.
// Policies that do not remember decide once per documents, kept across chunks up to kRemembered
// (past it, forgotten at the next chunk); each such decision's plan name and engine step are made once.
class PolicyDecisions {
 public:
  struct Named {
    selector::Decision decision;
    std::string plan_name;
    std::optional<StepEngine::Step> step;  // the engine's, once asked
    std::optional<double> model_flops;
  };

  explicit PolicyDecisions(selector::Policy& policy) : policy_(&policy) {}
  void begin_chunk(const traces::TrainingSchedule& chunk) {
    if (decided_.size() > kRemembered) decided_.clear();
    if (steps_.size() > kRemembered) steps_.clear();
    chunk_ = &chunk;
    decisions_.assign(chunk.micro_batches.size(), nullptr);
    fresh_.clear();
    if (policy_->remembers()) fresh_.reserve(decisions_.size());  // the pointers into it stay valid
    next_ = 0;
  }
  // Decides up to `count` more; false once every micro-batch of the chunk is decided.
  bool decide_some(std::size_t count) {
    for (const std::size_t end = std::min(decisions_.size(), next_ + count); next_ < end; ++next_) {
      const std::vector<int64_t>& documents = chunk_->micro_batches[next_];
      if (policy_->remembers()) {
        Named& fresh = fresh_.emplace_back(named(policy_->decide(MicroBatch{documents})));
        // A remembering policy's plan for the same documents may differ; its step is the same.
        if (!fresh.plan_name.empty())
          if (const auto known = steps_.find({fresh.plan_name, documents}); known != steps_.end())
            fresh.step = known->second;
        decisions_[next_] = &fresh;
        continue;
      }
      auto found = decided_.find(documents);
      if (found == decided_.end())
        found = decided_.emplace(documents, named(policy_->decide(MicroBatch{documents}))).first;
      decisions_[next_] = &found->second;
    }
    return next_ < decisions_.size();
  }
  std::size_t decided() const { return decisions_.empty() ? 0 : next_; }
  Named& operator[](std::size_t i) { return *decisions_[i]; }
  // The engine's step for micro-batch i, asked once per plan and documents.
  const StepEngine::Step& step(std::size_t i, StepEngine& engine) {
    Named& named = *decisions_[i];
    if (named.step) return *named.step;
    const std::vector<int64_t>& documents = chunk_->micro_batches[i];
    named.step = engine.step(named.decision.plan, MicroBatch{documents});
    if (policy_->remembers()) steps_.emplace(std::pair{named.plan_name, documents}, *named.step);
    return *named.step;
  }
  double model_flops(std::size_t i, const ModelSpec& model) {
    Named& named = *decisions_[i];
    if (!named.model_flops)
      named.model_flops = steps::model_flops(model, MicroBatch{chunk_->micro_batches[i]}, 1);
    return *named.model_flops;
  }
  void end_chunk() {
    fresh_ = {};
    decisions_ = {};
    next_ = 0;
  }

 private:
  static constexpr std::size_t kRemembered = std::size_t{1} << 16;
  static Named named(selector::Decision decision) {
    std::string name = decision.plan.empty() ? std::string() : paradyse::plan_name(decision.plan);
    return {std::move(decision), std::move(name), std::nullopt, std::nullopt};
  }
  selector::Policy* policy_;
  const traces::TrainingSchedule* chunk_ = nullptr;
  std::unordered_map<std::vector<int64_t>, Named, boost::hash<std::vector<int64_t>>> decided_;
  // A remembering policy's steps, by plan and documents.
  using PlanDocuments = std::pair<std::string, std::vector<int64_t>>;
  std::unordered_map<PlanDocuments, StepEngine::Step, boost::hash<PlanDocuments>> steps_;
  std::vector<Named> fresh_;
  std::vector<Named*> decisions_;
  std::size_t next_ = 0;
};

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

PolicyRuns::PolicyRuns(const std::vector<selector::Policy*>& policies, std::size_t first) : first_(first) {
  for (selector::Policy* policy : policies) decisions_.push_back(std::make_unique<PolicyDecisions>(*policy));
}

PolicyRuns::~PolicyRuns() = default;

void PolicyRuns::run(const traces::TrainingSchedule& chunk, StepEngine& engine, CompareRecorder& recorder,
                     const Progress& progress) {
  PARADYSE_CHECK(chunk.step_of.size() == chunk.micro_batches.size(), "a schedule's steps and micro-batches");
  const std::size_t count = chunk.micro_batches.size();
  const std::size_t policies = decisions_.size();
  const int64_t total = static_cast<int64_t>(count * policies);
  // Each policy's decisions, then the simulations they need, during which the next policy decides.
  for (auto& decisions : decisions_) decisions->begin_chunk(chunk);
  const auto report = [&] {
    if (!progress) return;
    int64_t decided = 0;
    for (const auto& d : decisions_) decided += static_cast<int64_t>(d->decided());
    progress(decided, total, "deciding");
  };
  constexpr std::size_t kDecisionsAtOnce = 256;
  std::vector<SequenceResult> results(count);
  std::vector<double> optimizer_s(count);
  for (std::size_t p = 0; p < policies; ++p) {
    const std::string& name = recorder.policy(first_ + p).policy;
    PolicyDecisions& decided = *decisions_[p];
    while (decided.decide_some(kDecisionsAtOnce)) report();
    engine.prefetch(
        [&] {
          for (std::size_t i = 0; i < count; ++i)
            if (!decided[i].decision.plan.empty() && !decided[i].step)
              engine.step(decided[i].decision.plan, MicroBatch{chunk.micro_batches[i]});
        },
        [&](std::size_t simulated, std::size_t simulations) {
          if (progress)
            progress(static_cast<int64_t>(p * count), total,
                     fmt::format("{}: simulating {}/{}", name, simulated, simulations));
        },
        [&] { return p + 1 < policies && decisions_[p + 1]->decide_some(kDecisionsAtOnce); });
    for (std::size_t i = 0; i < count; ++i) {
      const std::vector<int64_t>& documents = chunk.micro_batches[i];
      PolicyDecisions::Named& named = decided[i];
      const selector::Decision& decision = named.decision;
      SequenceResult& s = results[i];
      s = {};
      s.index = chunk.first_micro_batch + static_cast<int64_t>(i);
      s.step = chunk.step_of[i];
      s.tokens = std::accumulate(documents.begin(), documents.end(), int64_t{0});
      s.documents = static_cast<int64_t>(documents.size());
      s.padded_tokens = decision.padded_tokens;
      s.model_flops = decided.model_flops(i, engine.model());
      s.layer_switches = decision.switches;
      s.predicted_s = decision.predicted_s;
      s.predicted_peak_bytes = decision.predicted_peak_bytes;
      optimizer_s[i] = 0;
      if (decision.plan.empty()) continue;
      s.plan = named.plan_name;
      const StepEngine::Step& step = decided.step(i, engine);
      s.padded_tokens = step.padded_tokens;
      s.peak_bytes = step.peak_bytes;
      s.fits = step.fits;
      s.seconds = step.seconds;
      s.host_bound_s = step.host_bound_s;
      optimizer_s[i] = step.optimizer_s;
    }
    accumulate(results, optimizer_s);
    for (const SequenceResult& s : results) recorder.add(first_ + p, s);
  }
  for (auto& decisions : decisions_) decisions->end_chunk();
}

CompareResult run_compare(const std::vector<selector::Policy*>& policies,
                          const traces::TrainingSchedule& schedule, StepEngine& engine,
                          const Progress& progress, int error_samples, SequenceSink* sink) {
  std::vector<std::string> names;
  for (const selector::Policy* policy : policies) names.push_back(policy->name());
  CompareRecorder recorder(names, sink);
  PolicyRuns(policies).run(schedule, engine, recorder, progress);
  CompareResult result = recorder.finish(engine.cluster(), engine.degree());
  const int64_t total = static_cast<int64_t>(schedule.micro_batches.size() * policies.size());
  if (progress) progress(total, total, "measuring the interpolation error");
  finish_engine_figures(result, engine, error_samples);
  return result;
}

void finish_engine_figures(CompareResult& result, StepEngine& engine, int error_samples) {
  result.engine = engine.name();
  result.interpolation = engine.measure_error(error_samples);
  result.method = engine.method();
  result.simulations = engine.simulations();
}

}  // namespace paradyse::evaluation
