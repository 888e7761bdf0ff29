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

#include "evaluation/options.hpp"
#include "evaluation/simulated_times.hpp"
#include "steps/estimate.hpp"
#include "traces/packing.hpp"

namespace paradyse::evaluation {

// One micro-batch (one sequence, unless packed).
struct SequenceResult {
  int64_t index = 0;  // position in the run
  int64_t step = 0;   // the global batch it belongs to
  int64_t tokens = 0;
  int64_t documents = 1;
  int64_t padded_tokens = 0;
  double model_flops = 0;
  std::string plan;  // plan_name(); "" when the policy had none
  int layer_switches = 0;
  double predicted_s = 0;
  double predicted_peak_bytes = 0;
  // The engine's time of its step; in a global batch, less the optimizer step for all but the batch's
  // last trained micro-batch (they accumulate gradients; one optimizer step runs for all). 0 when not
  // trained.
  double seconds = 0;
  double host_bound_s = 0;  // of `seconds`, the GPUs waiting for their hosts (mean over ranks)
  double peak_bytes = 0;    // the engine's
  bool fits = false;
  // Group policies, per step: its slowest group over the mean group (per round, averaged), and the
  // solver's time; 0 for other policies.
  double imbalance = 0;
  double solve_s = 0;
};

struct PolicyResult {
  std::string policy;
  std::vector<SequenceResult> sequences;
  int64_t trained = 0;
  double total_s = 0;       // over trained sequences
  double host_bound_s = 0;  // of total_s, the GPUs waiting for their hosts (mean over ranks)
  double trained_tokens = 0;
  double model_flops = 0;
  double tokens_per_second = 0;
  double mfu = 0;
  int64_t oom_count = 0;           // micro-batches out of memory
  double oom_tokens = 0;           // their tokens
  int64_t first_oom = -1;          // index of the first micro-batch out of memory
  int64_t max_len_before_oom = 0;  // longest micro-batch trained before the first out of memory
  int64_t plan_switches = 0;       // trained micro-batches whose plan differs from the previous trained one
  // Which strategies the policy used: each strategy's share of the trained time, a micro-batch's time
  // split evenly over its layers (by name, recomputation aside).
  std::map<std::string, double> strategy_time_shares{};
  int64_t steps = 0;  // optimizer steps: global batches with a trained micro-batch
  // Group policies (group_compare.hpp): their micro-batches, one per group of each round (`sequences`
  // holds a result per step), the rounds, the mean over steps of the rounds' mean imbalance (slowest
  // group over the mean group), and the solver's time.
  int64_t group_micro_batches = 0;
  int64_t rounds = 0;
  double mean_imbalance = 0;
  double solve_s = 0;
  int64_t micro_batches() const {
    return group_micro_batches > 0 ? group_micro_batches : static_cast<int64_t>(sequences.size());
  }
};

struct CompareResult {
  std::string engine;  // "sim" or "analytic"
  std::string method;  // how times were obtained
  std::optional<PercentageErrors> interpolation;
  int64_t simulations = 0;
  std::vector<PolicyResult> policies;
};

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

// The totals of `result` from its micro-batches: trained, time, tokens, MFU over `degree` GPUs, out of
// memory, plan switches.
void summarise(PolicyResult& result, const hw::ClusterSpec& cluster, int degree);

// Called now and then with (work done, work total, what is running).
using Progress = std::function<void(int64_t, int64_t, const std::string&)>;

// Every policy over the schedule's micro-batches, in order; then the interpolation error (sim engine)
// on `error_samples`.
CompareResult run_compare(const std::vector<selector::Policy*>& policies,
                          const traces::TrainingSchedule& schedule, StepEngine& engine,
                          const Progress& progress = {}, int error_samples = 24);

}  // namespace paradyse::evaluation
