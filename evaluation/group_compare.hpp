// Group policies in a compare run: per global batch, the group solver (selector/group_solver.hpp)
// assigns its sequences to groups of GPUs, each group's micro-batch gets the pricing policy's plan at
// its degree, and the engine times the whole grouped step (strategies/grouped_step.hpp): the
// simulator runs every group of every round at once on the cluster (Simulator::simulate_grouped); the
// analytic engine prices each rank's traced program and takes the slowest rank.
//
//   flexsp     groups of any degrees, Ulysses in every group (static:ulysses_z at each degree), weights
//              sharded over the job: FlexSP's setting, solved by the greedy instead of its MILP
//   dp-groups  groups of one degree per step (the degree whose schedule is fastest), each group's
//              micro-batch on its fastest per-layer plan in the grouped step (GroupCosts::kSwitching):
//              data parallelism over sequence-parallel groups, switching per layer inside each
//   groups     groups of any degrees, each micro-batch on its fastest per-layer plan
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "evaluation/compare.hpp"
#include "evaluation/grouped_step_option.hpp"  // parse_shard_group
#include "selector/group_costs.hpp"
#include "strategies/grouped_step.hpp"

namespace paradyse::evaluation {

struct GroupPolicy {
  std::string name;
  std::string pricing;      // the policy that plans each group's micro-batch
  bool one_degree = false;  // every group of a step the same degree
};

// The grouped step of one solved global batch (sequences of `lengths`): each round's groups, the
// ranks a round leaves without work as idle groups of one, each group's micro-batch padded for its
// degree and planned by `costs`. `fits`: every micro-batch's plan fits.
struct PlannedStep {
  GroupedStepSpec spec;
  bool fits = true;
  int64_t tokens = 0, padded_tokens = 0, documents = 0, micro_batches = 0;
  double model_flops = 0;
};
PlannedStep plan_grouped_step(const ModelSpec& model, int job, const std::vector<int64_t>& lengths,
                              const selector::GroupSchedule& schedule, selector::GroupCosts& costs);

// Comma-separated names of the above; "" for none. InputError naming --group-policies otherwise.
std::vector<GroupPolicy> parse_group_policies(const std::string& names);

// The prices of `policy`'s groups on the engine's job for micro-batches up to `longest` tokens, `pricing`
// the candidates and group degrees it may use. InputError naming --group-policies when the job cannot
// hold the model's sharded state, or no group it may form trains even the shortest sequence (then
// every global batch would fit nowhere).
std::unique_ptr<selector::GroupCosts> group_costs(const GroupPolicy& policy, const StepEngine& engine,
                                                  const selector::GroupPricingOptions& pricing,
                                                  int64_t longest);

// The most tokens one step of `schedule` holds: no group's micro-batch holds more.
int64_t largest_step_tokens(const traces::TrainingSchedule& schedule);

// One group policy over a run, a chunk of whole steps at a time (its sequences, whatever micro-batches
// packing made of them), on the engine's job of engine.degree() GPUs: a result per step added to
// `recorder` as policy `index`: its sequences' tokens and count, the group layout as the plan
// ("4x2,1x8 | 8" per round), and its time; sequences that fit no group are a result of their own, out
// of memory.
class GroupPolicyRun {
 public:
  GroupPolicyRun(const GroupPolicy& policy, StepEngine& engine, selector::GroupCosts& costs,
                 CompareRecorder& recorder, std::size_t index);
  void run(const traces::TrainingSchedule& chunk, const Progress& progress = {});
  // The mean imbalance into the policy's totals, after the last chunk.
  void finish();

 private:
  GroupPolicy policy_;
  StepEngine* engine_;
  selector::GroupCosts* costs_;
  CompareRecorder* recorder_;
  std::size_t index_;
  int64_t results_ = 0;
  double imbalance_sum_ = 0;
  int64_t solved_steps_ = 0;  // with at least one round
};

// A whole schedule under `policy`, its prices made first; each step's result also to `sink`.
PolicyResult run_group_policy(const GroupPolicy& policy, const traces::TrainingSchedule& schedule,
                              StepEngine& engine, const selector::GroupPricingOptions& pricing = {},
                              SequenceSink* sink = nullptr);

}  // namespace paradyse::evaluation
