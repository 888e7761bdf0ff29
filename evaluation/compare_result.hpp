// What a compare run yields, kept in memory that does not grow with the run: each policy's running
// totals, its plot curves thinned as they grow, and, for every pair of policies, their times over the
// steps both trained whole. Each micro-batch's own result passes through once, in run order, to a
// SequenceSink (per_sequence.csv, or a test's list) and is not kept.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/statistics.hpp"
#include "hw_models/cluster.hpp"

namespace paradyse::evaluation {

// One micro-batch (one sequence, unless packed); for a group policy, one step.
struct SequenceResult {
  int64_t index = 0;  // position in the run
  int64_t step = 0;   // the global batch it belongs to
  int64_t tokens = 0;
  int64_t documents = 1;
  int64_t padded_tokens = 0;
  double model_flops = 0;
  std::string plan{};  // plan_name(); "" when the policy had none
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
  // Group policies, per step: the solver's lower bound on the step in its own model (predicted_s is
  // its schedule's time there), its slowest group over the mean group (per round, averaged), and the
  // solver's time; 0 for other policies.
  double lower_bound_s = 0;
  double imbalance = 0;
  double solve_s = 0;
};

// A policy's curves for the report's plots, in memory bounded whatever the run's length.
struct PolicyCurves {
  // Cumulative training time up to each micro-batch before the first out of memory: its position
  // (1-based), its tokens and the time so far. Every `stride`-th point and the last; the stride doubles
  // whenever the points reach twice kPoints, so that between kPoints and 2·kPoints are kept.
  struct Point {
    int64_t position = 0;
    int64_t tokens = 0;
    double seconds = 0;
  };
  static constexpr std::size_t kPoints = 2000;
  std::vector<Point> cumulative;
  std::optional<Point> last;  // the latest point, when the stride left it out
  int64_t stride = 1;
  // The time of one trained step by padded length: the last micro-batch of each length. At most
  // kLengths lengths; past that, lengths are rounded down to their `length_bits` leading binary digits
  // (a few thousand a factor of two: finer than a plot on a log scale shows), fewer as needed.
  static constexpr std::size_t kLengths = std::size_t{1} << 16;
  std::map<int64_t, double> step_by_length;
  int length_bits = 64;
};

struct PolicyResult {
  std::string policy;
  int64_t results = 0;  // micro-batch results (one per step for group policies)
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
  // Group policies (group_compare.hpp): their micro-batches, one per group of each round (`results`
  // counts one per step), the rounds, the mean over steps of the rounds' mean imbalance (slowest group
  // over the mean group), the solver's time, and over the solved steps the sums of the solver's step
  // times in its own model and of its lower bounds on them (how far a better schedule could go there).
  int64_t group_micro_batches = 0;
  int64_t rounds = 0;
  double mean_imbalance = 0;
  double solve_s = 0;
  double solver_predicted_s = 0;
  double solver_lower_bound_s = 0;
  PolicyCurves curves{};
  int64_t micro_batches() const { return group_micro_batches > 0 ? group_micro_batches : results; }
};

// A static policy at the run's own micro-batch budget ("static:NAME"), and one run again at another
// budget ("static:NAME@128K", tuned_statics.hpp), which the report's other comparisons leave out.
bool is_static(const PolicyResult& p);
bool is_budget_variant(const PolicyResult& p);

// Two policies over the steps both trained whole (every micro-batch in memory): the first's seconds,
// the second's, and how many steps.
struct CommonSteps {
  double a_s = 0, b_s = 0;
  int64_t steps = 0;
};

struct CompareResult {
  std::string engine;  // "sim" or "analytic"
  std::string method;  // how times were obtained
  std::optional<PercentageErrors> interpolation;
  int64_t simulations = 0;
  std::vector<PolicyResult> policies;
  // common[a * policies + b]: policies a and b over the steps both trained whole.
  std::vector<CommonSteps> common{};

  CommonSteps common_steps(const PolicyResult& a, const PolicyResult& b) const;
};

// Where each micro-batch's result goes as it is made: policy by policy (the index into the run's
// policies, named in start()), each policy's results in run order.
class SequenceSink {
 public:
  virtual ~SequenceSink() = default;
  virtual void start(const std::vector<std::string>& policies) = 0;
  virtual void write(std::size_t policy, const SequenceResult& result) = 0;
};

// Every result kept, per policy: for short runs and tests.
class SequenceLog final : public SequenceSink {
 public:
  void start(const std::vector<std::string>& policies) override { results_.resize(policies.size()); }
  void write(std::size_t policy, const SequenceResult& result) override {
    results_[policy].push_back(result);
  }
  const std::vector<SequenceResult>& operator[](std::size_t policy) const { return results_.at(policy); }

 private:
  std::vector<std::vector<SequenceResult>> results_;
};

// Builds a CompareResult from micro-batch results given in run order, a policy's results for one step
// consecutive; end_chunk() when every policy's results so far cover the same whole steps.
class CompareRecorder {
 public:
  explicit CompareRecorder(std::vector<std::string> policies, SequenceSink* sink = nullptr);
  std::size_t size() const { return result_.policies.size(); }
  // The totals so far, for a group policy's own figures (rounds, imbalance, solver time).
  PolicyResult& policy(std::size_t p) { return result_.policies.at(p); }
  void add(std::size_t p, const SequenceResult& s);
  void end_chunk();
  // The totals: tokens/s and MFU over `degree` GPUs of `cluster`, the strategies' shares.
  CompareResult finish(const hw::ClusterSpec& cluster, int degree);

 private:
  struct StepTime {
    int64_t step = 0;
    double seconds = 0;
    bool whole = true;     // every micro-batch trained
    bool trained = false;  // one at least
  };
  struct Running {
    std::string previous_plan;
    std::map<std::string, double> strategy_s;
    std::vector<StepTime> chunk_steps;  // this chunk's steps, in order
  };
  void add_strategy_time(Running& running, const std::string& plan, double seconds);
  CompareResult result_;
  std::vector<Running> running_;
  std::unordered_map<std::string, std::vector<std::string>> layer_names_;  // by plan name
  SequenceSink* sink_;
};

}  // namespace paradyse::evaluation
