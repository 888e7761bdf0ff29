// The group solver's problem for a global batch (group_solver.hpp), priced as the grouped step runs
// it (strategies/grouped_step.hpp). A policy chooses each micro-batch's plan on a group of d ranks:
// one strategy everywhere for `static:ulysses_z` (FlexSP's), the per-layer optimum of the one-group
// model for `optimal`, or, for kSwitching, the fastest per-layer plan by the grouped step's own
// programs (below). A micro-batch's time and memory are those of the analytic model on rank 0's traced
// program of a round in which its group trains it and the job's other ranks are idle: the job's per-layer
// weight gathers and gradient reduce-scatter included, the optimizer step and the replicas' sums of the
// gradients under hybrid sharding not (one per global batch).
// Its time is priced without the gathers' prefetch, so that its work and the round's collectives add
// up; its memory is that program's peak plus one more layer's gathered weights, what the prefetch
// holds at most (an upper bound on the prefetching program's peak). Where that one layer is what keeps
// the fastest plan for the whole job out of memory, the micro-batch's round may go without the
// prefetch instead (memory relief, Price::prefetch), when the plan's gain is more than the prefetch
// hides; its sequences then carry the gathers the prefetch would have hidden.
// Sequences are priced at the points of a grid of lengths 5 % apart, so that a trace's many lengths
// cost a few hundred programs per degree: a sequence fits where the next point fits, and takes the
// time between the points around it; a degree's capacity is the longest grid length whose program
// fits. The job's collectives are a fixed cost per round (GroupProblem::round_s: what
// they take an idle rank), and the shortest grid length's time beyond them a fixed cost per
// micro-batch (GroupProblem::micro_batch_s: a packed micro-batch launches its kernels and reads its
// weights once), both taken off each sequence's time. A sequence short enough to pack is priced as
// its share of a micro-batch of like documents up to the packing limit: a packed micro-batch's GEMMs
// run at the efficiency of its whole tokens, not of one document's. What the prefetch hides of a
// round's collectives under a group's work is, per degree, the prefetch's gain on a micro-batch at
// the packing limit (GroupProblem::hidden_s). Sequences pack into one micro-batch up to the
// longest grid length that the plan of a micro-batch of that length holds (GroupProblem::packing_tokens:
// found from the shortest one's plan, whose limit may run a plan that holds more, until the plan at the
// limit is the one that set it), so that what a packed micro-batch runs is what its sequences were
// priced on; a longer one is trained alone. What
// the model leaves out: other groups' contention and their waits at the job's collectives (the simulator has
// both), and a layer's compute shorter than its gather (the prefetch then hides less).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "costmodel/program_cost.hpp"
#include "selector/cost_source.hpp"
#include "selector/group_solver.hpp"
#include "selector/policy.hpp"
#include "strategies/grouped_step.hpp"

namespace paradyse::selector {

// Throws InputError when `job` is not a power of two of the cluster's GPUs, `shard_degree` (0: the
// job) does not divide it, or its GPUs cannot hold the model's weights, gradients and optimizer state
// sharded over `shard_degree` of them.
void check_group_job(const ModelSpec& model, const hw::ClusterSpec& cluster, int job, int shard_degree = 0);

struct GroupPricingOptions {
  // kSwitching: also each candidate strategy with selective and full recomputation, and, on a cluster
  // with a host link (GpuSpec::host_link_bytes_per_second), with its activations offloaded.
  bool recompute_choices = false;
  // The group degrees allowed (powers of two that divide the job); empty: every power of two.
  std::vector<int> degrees;
  // The ranks each weight is sharded over (GroupedStepSpec::shard_degree): 0 for the whole job, a node's
  // GPUs for hybrid sharding.
  int shard_degree = 0;
  // What the gradients are summed and reduce-scattered in (GroupedStepSpec::gradient_reduce_dtype).
  DType gradient_reduce_dtype = DType::bf16;
};

// Throws InputError naming --group-sizes unless every degree is a power of two that divides `job`.
void check_group_degrees(const std::vector<int>& degrees, int job);

class GroupCosts {
 public:
  // Degrees: the powers of two up to `job` (or those of options.degrees) at which the policy can run
  // the model; micro-batches of up to `max_tokens` (the capacities stop there). Throws InputError
  // as check_group_job does, or when no degree can run the model.
  GroupCosts(const ModelSpec& model, const hw::ClusterSpec& cluster, int job, const std::string& policy,
             int64_t max_tokens, const GroupPricingOptions& options = {});
  ~GroupCosts();

  int job() const { return job_; }
  int shard_degree() const { return shard_degree_; }  // never 0: the job's when it shards over the job
  DType gradient_reduce_dtype() const { return gradient_reduce_dtype_; }
  const std::vector<int>& degrees() const { return degrees_; }
  // The problem of one global batch of sequences of these lengths (its tokens padded as the job's
  // layout pads them, so that capacity holds on any group); times cached per length.
  GroupProblem problem(const std::vector<int64_t>& tokens);
  // A (packed) micro-batch on a group of `degree`, one of degrees(): the policy's plan, and that
  // plan's time in a grouped step without the prefetch and without the optimizer step, and its peak
  // memory with the prefetch's layer, or without it where its round goes without (as above).
  struct Price {
    Plan plan;
    double seconds = 0;
    double peak_bytes = 0;
    bool fits = false;
    // false: a group of the whole job whose plan fits only without the prefetch's layer (peak_bytes is
    // then without it), and is faster so than the fastest plan that fits with it by more than the
    // prefetch would hide; its round then gathers each layer as it uses it
    // (GroupedStepSpec::rounds_without_prefetch).
    bool prefetch = true;
  };
  Price price(const MicroBatch& micro_batch, int degree);
  // The pricing policy that switches per layer by the grouped step's own programs (not the one-group
  // model's, whose tensor-parallel layers a grouped step makes dearer: they take their shard out of
  // whole gathered weights and send back zero-padded gradients). Every layer is the same, so without
  // a memory limit the fastest plan is uniform: the fastest candidate that fits. When a faster one
  // does not fit, a plan may mix it with a leaner one that does, as many layers of the faster as fit
  // (by bisection, in either order). Two candidates suffice: the linear relaxation of choosing layer
  // counts under one memory limit has an optimum with at most two of them.
  static constexpr const char* kSwitching = "switching";

 private:
  struct AtDegree;
  AtDegree& at(int degree);
  // A plan's price, its program priced once (the round without the prefetch) and held to the memory
  // limit with the prefetch's layer or without it.
  using PlanPricer = std::function<Price(const Plan& plan, bool prefetch)>;
  Price held(const Plan& plan, const costmodel::ProgramPrice& program, bool prefetch) const;
  // A step of this one round, its weights sharded and its gradients reduced as this job's.
  GroupedStepSpec one_round(Round round, bool prefetch, bool sum_over_replicas = false) const;
  // Rank 0's program of a round in which ranks [0, degree) train `micro_batch` by `plan`, priced.
  costmodel::ProgramPrice price_round(const MicroBatch& micro_batch, int degree, const Plan& plan,
                                      bool prefetch, bool sum_over_replicas = false);
  // What a sequence of `length` adds to a micro-batch on a group of `degree` (GroupProblem::seconds), and
  // the plan of the micro-batch that priced it.
  struct SequencePrice {
    double seconds = GroupProblem::kNoFit;  // kNoFit where it does not fit
    Plan plan;
  };
  SequencePrice sequence_s(int64_t length, int degree);
  // kSwitching's plan within the memory limit with the prefetch's layer or without it.
  Price price_switching(const PlanPricer& plan_price, int degree, bool prefetch);
  // The grid point at or above `tokens`, padded as on the whole job.
  int64_t grid_tokens(int64_t tokens) const;
  // The grid point before grid_tokens(tokens) (the same point, or above `tokens`, where padding
  // leaves no other).
  int64_t grid_below(int64_t tokens) const;
  ModelSpec model_;
  hw::ClusterSpec cluster_;
  int job_;
  int shard_degree_;
  DType gradient_reduce_dtype_;
  bool causal_;
  std::vector<CandidateKey> candidates_;  // kSwitching's
  double static_bytes_ = 0;               // per GPU, the weights sharded over the shard group
  double prefetch_bytes_ = 0;             // one layer's gathered weights, with the allocator's fragmentation
  double round_s_ = 0;  // a round of an idle rank: the job's collectives (GroupProblem::round_s)
  double step_s_ = 0;   // GroupProblem::step_s
  std::vector<int> degrees_;
  std::vector<std::unique_ptr<AtDegree>> at_degree_;
};

}  // namespace paradyse::selector
