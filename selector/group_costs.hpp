// The group solver's problem for a global batch (group_solver.hpp), priced as the grouped step runs
// it (strategies/grouped_step.hpp). A policy chooses each micro-batch's plan on a group of d ranks:
// one strategy everywhere for `static:ulysses_z` (FlexSP's), the per-layer optimum of the one-group
// model for `optimal`, or, for kFastestStrategy, the strategy fastest in the grouped step itself. The
// micro-batch's time and memory are those of the analytic model on rank 0's traced program
// of a round in which its group trains it and the job's other ranks are idle: the job's per-layer
// weight gathers and gradient reduce-scatter included, the optimizer step not (one per global batch).
// A sequence is priced at the next point of a grid of lengths 5 % apart, so that a trace's many
// lengths cost a few hundred programs per degree; a degree's capacity is the longest grid length
// whose program fits. The job's collectives are a fixed cost per round (GroupProblem::round_s: what
// they take an idle rank), taken off each sequence's time. What the model leaves out: other groups'
// contention and their waits at the job's collectives (the simulator has both).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "selector/group_solver.hpp"
#include "selector/policy.hpp"

namespace paradyse::selector {

// Throws InputError when `job` is not a power of two of the cluster's GPUs, or its GPUs cannot hold
// the model's weights, gradients and optimizer state sharded over all of them.
void check_group_job(const ModelSpec& model, const hw::ClusterSpec& cluster, int job);

class GroupCosts {
 public:
  // Degrees: the powers of two up to `job` at which the policy can run the model. Throws InputError
  // as check_group_job does, or when no degree can run the model.
  GroupCosts(const ModelSpec& model, const hw::ClusterSpec& cluster, int job, const std::string& policy,
             int64_t max_tokens);
  ~GroupCosts();

  int job() const { return job_; }
  const std::vector<int>& degrees() const { return degrees_; }
  // The problem of one global batch of sequences of these lengths (its tokens padded as the job's
  // layout pads them, so that capacity holds on any group); times cached per length.
  GroupProblem problem(const std::vector<int64_t>& tokens);
  // A (packed) micro-batch on a group of `degree`, one of degrees(): the policy's plan, and that
  // plan's time (without the optimizer step) and peak memory in a grouped step, as above.
  struct Price {
    Plan plan;
    double seconds = 0;
    double peak_bytes = 0;
    bool fits = false;
  };
  Price price(const MicroBatch& micro_batch, int degree);
  // The pricing policy that takes, for each micro-batch, the strategy whose uniform plan is fastest
  // in the grouped step (by its own programs, not the one-group model's).
  static constexpr const char* kFastestStrategy = "fastest";

 private:
  struct AtDegree;
  AtDegree& at(int degree);
  Price price_plan(const MicroBatch& micro_batch, int degree, const Plan& plan);
  // The grid point at or above `tokens`, padded as on the whole job.
  int64_t grid_tokens(int64_t tokens) const;
  ModelSpec model_;
  hw::ClusterSpec cluster_;
  int job_;
  bool causal_;
  double static_bytes_ = 0;  // per GPU, the weights sharded over the job
  double round_s_ = 0;       // a round of an idle rank: the job's collectives (GroupProblem::round_s)
  std::vector<int> degrees_;
  std::vector<std::unique_ptr<AtDegree>> at_degree_;
};

}  // namespace paradyse::selector
