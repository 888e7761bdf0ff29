// Simulated iteration times for runs over whole traces. A trace has tens of thousands of sequences;
// simulations of the same plan at the same padded length are identical, so each is run once, and
// with a grid (ratio > 1) the plan is simulated only at grid lengths: every padded length up to 64
// layout quanta (2p tokens for causal models, p otherwise), then lengths growing by `ratio`, and a
// sequence between two grid lengths gets the time read off the line between them. measure_error
// then simulates a sample of those sequences directly and says how far the interpolation was off.
//
// Simulations run in child processes forked from this one, in shards of a few run one after another,
// the shards `jobs` at a time. SimGrid's clock is absolute, so a simulation's time depends, in its
// last bits, on the simulations its process ran before it: the shards are made from the simulations
// alone, never from `jobs`, so that the times are the same bits however many run at once. Times asked
// for inside prefetch() are only noted, and their simulations then run together.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/statistics.hpp"
#include "steps/step_simulator.hpp"

namespace paradyse::evaluation {

// An iteration's time, and the part of it in which the GPUs wait for their hosts to issue the next op
// (the mean over ranks of sim::RankResult::host_bound_s).
struct IterationTime {
  double seconds = 0;
  double host_bound_s = 0;
};

class SimulatedTimes {
 public:
  // ratio 0: every padded length simulated exactly; jobs: simulations run at once.
  SimulatedTimes(steps::StepSimulator& simulator, int degree, int64_t batch, double ratio, int jobs = 1);

  // Seconds of one iteration of `plan` at `padded_tokens` (already a multiple of the layout quantum).
  double seconds(const Plan& plan, int64_t padded_tokens) { return time(plan, padded_tokens).seconds; }
  // The same, with its host-bound time read off the same grid.
  IterationTime time(const Plan& plan, int64_t padded_tokens);
  // Seconds of one iteration of `plan` on a packed micro-batch whose padded documents are `cost_key`
  // (MicroBatch::cost_key): the time of one sequence of the same padded length (as above) times
  // `analytic_ratio`, the analytic model's time of the packed micro-batch over that sequence's. What
  // packing changes is the attention within each document, which the analytic model prices op by op
  // as the simulator does; measure_error simulates a sample of packed micro-batches directly.
  double seconds(const Plan& plan, const std::vector<int64_t>& cost_key, double analytic_ratio) {
    return time(plan, cost_key, analytic_ratio).seconds;
  }
  IterationTime time(const Plan& plan, const std::vector<int64_t>& cost_key, double analytic_ratio);
  // Simulates up to `samples` of the interpolated (plan, length) pairs met so far, spread evenly over
  // them, and compares; no samples when nothing was interpolated.
  PercentageErrors measure_error(int samples);

  // While `body` runs, the times above note the simulations they need and return zeros (nothing is
  // interpolated or counted); then those simulations run, `jobs` at a time, with `progress(done,
  // total)` after each and `idle` called while this process waits for them (run_in_children).
  void prefetch(const std::function<void()>& body,
                const std::function<void(std::size_t, std::size_t)>& progress = {},
                const std::function<bool()>& idle = {});

  int64_t simulations() const { return simulations_; }
  std::string method() const;

 private:
  using Key = std::pair<Plan, std::vector<int64_t>>;  // plan, padded documents (one for a sequence)
  IterationTime simulate(const Plan& plan, const std::vector<int64_t>& padded_documents);
  // Runs every pending simulation.
  void run_pending(const std::function<void(std::size_t, std::size_t)>& progress = {},
                   const std::function<bool()>& idle = {});

  steps::StepSimulator& simulator_;
  int degree_;
  int64_t batch_;
  double ratio_;
  int jobs_;
  int64_t quantum_;
  std::map<Key, IterationTime> simulated_;
  std::map<Key, double> interpolated_;
  bool collecting_ = false;
  std::set<Key> pending_;
  int64_t simulations_ = 0;
  int64_t scaled_ = 0;  // packed micro-batches priced by the analytic ratio
};

}  // namespace paradyse::evaluation
