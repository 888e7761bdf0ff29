// A compare run: every policy over the same micro-batches (traces/packing.hpp): one sequence each and
// one training step per sequence (batch 1, as in the paper), N consecutive sequences a step, or global
// batches of a token budget packed into micro-batches of documents. Each micro-batch has its own plan;
// gradients accumulate and the optimizer steps once per global batch. Times and memory come from an
// engine: the analytic model, or the simulator.
// A micro-batch whose plan does not fit (by the engine's memory, whatever the policy predicted) is not
// trained: it counts as out of memory, and the policy's curve of cumulative time ends at its first.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "evaluation/compare_result.hpp"
#include "evaluation/options.hpp"
#include "evaluation/simulated_times.hpp"
#include "steps/estimate.hpp"
#include "traces/packing.hpp"

namespace paradyse::evaluation {

// What one training step of a plan costs: the simulator's time (or the analytic estimate's) and the
// memory fold of the plan's allocations (the simulator's and the estimate's agree to the byte).
// Kept across runs so that the simulations of one run serve the next.
class StepEngine {
 public:
  // engine "sim" or "analytic"; grid_ratio and jobs: see SimulatedTimes.
  StepEngine(const ModelSpec& model, const hw::ClusterSpec& cluster, int degree, const std::string& engine,
             double grid_ratio, int jobs = 1);
  ~StepEngine();

  struct Step {
    int64_t padded_tokens = 0;
    double seconds = 0;  // 0 when the plan does not fit (it is not run)
    double host_bound_s = 0;
    double peak_bytes = 0;
    bool fits = false;
    double optimizer_s = 0;  // the analytic estimate's optimizer step, the same for every plan
  };
  Step step(const Plan& plan, const MicroBatch& micro_batch);
  // The simulator's steps asked for in `body` are not timed but noted, and their simulations then run
  // at once, `idle` called while this process waits for them (SimulatedTimes::prefetch); the analytic
  // engine needs none, and neither is called.
  void prefetch(const std::function<void()>& body,
                const std::function<void(std::size_t, std::size_t)>& progress,
                const std::function<bool()>& idle = {});

  const std::string& name() const { return name_; }
  std::string method() const;
  std::optional<PercentageErrors> measure_error(int samples);
  int64_t simulations() const;
  const ModelSpec& model() const { return model_; }
  const hw::ClusterSpec& cluster() const { return cluster_; }
  int degree() const { return degree_; }
  steps::Estimator& estimator() { return estimator_; }
  steps::StepSimulator* simulator() { return simulator_.get(); }

 private:
  ModelSpec model_;
  hw::ClusterSpec cluster_;
  int degree_;
  std::string name_;
  steps::Estimator estimator_;
  std::unique_ptr<steps::StepSimulator> simulator_;
  std::unique_ptr<SimulatedTimes> simulated_;
};

// Called now and then with (work done, work total, what is running).
using Progress = std::function<void(int64_t, int64_t, const std::string&)>;

// Policies over a run's steps, a chunk of whole steps at a time, in order: each micro-batch's result
// added to a recorder as policy first, first + 1, ... (the order of `policies`). A policy that does not
// remember decides once per documents, across chunks, and each such decision is timed by the engine once.
class PolicyDecisions;
class PolicyRuns {
 public:
  explicit PolicyRuns(const std::vector<selector::Policy*>& policies, std::size_t first = 0);
  ~PolicyRuns();
  // `progress` counts the chunk's decisions and then its micro-batches, for every policy.
  void run(const traces::TrainingSchedule& chunk, StepEngine& engine, CompareRecorder& recorder,
           const Progress& progress = {});

 private:
  std::vector<std::unique_ptr<PolicyDecisions>> decisions_;
  std::size_t first_;
};

// The engine's name, method, interpolation error (sim engine, on `error_samples`) and simulations.
void finish_engine_figures(CompareResult& result, StepEngine& engine, int error_samples);

// Every policy over the schedule's micro-batches, in order, each result also given to `sink`; then
// the interpolation error (sim engine) on `error_samples`.
CompareResult run_compare(const std::vector<selector::Policy*>& policies,
                          const traces::TrainingSchedule& schedule, StepEngine& engine,
                          const Progress& progress = {}, int error_samples = 24,
                          SequenceSink* sink = nullptr);

}  // namespace paradyse::evaluation
