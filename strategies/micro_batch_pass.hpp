// One micro-batch's forward and backward on one rank, for any per-layer plan, wherever the weights
// come from: the parallel group's own shards (training_step.hpp) or the job's, gathered layer by layer
// (grouped_step.hpp). The pieces of the optimizer step the two share are here too.
#pragma once

#include <utility>
#include <vector>

#include "strategies/layer.hpp"
#include "strategies/training_step.hpp"

namespace paradyse {

// Where a micro-batch's weights come from and where its gradients go.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The embedding table (head = false) or the output head, whole: [V, h].
  virtual Tensor table(Backend& be, bool head) = 0;
  // Sums d_table [V, h] over the ranks into this rank's share of the table's gradient.
  virtual void add_table_grad(Backend& be, bool head, const Tensor& d_table) = 0;
  // Whether this rank's shards of the tables (ModelShards::embedding and head) are its rows of the
  // parallel group's vocabulary, rank r's the r-th V/p, so that a vocabulary-parallel embedding or head
  // may compute on them where they are.
  virtual bool tables_sharded_over_group() const = 0;
  // Layer `layer`'s weights as `strategy` runs them on the parallel group: the group's unified layout,
  // for the layer's forward or (`backward`) its backward.
  virtual const LayerWeights& layer(Backend& be, int layer, const Strategy& strategy, bool backward) = 0;
  // Where the layer's backward adds its gradients; called after layer(), before the backward.
  virtual LayerWeights& layer_grads(Backend& be, int layer, const Strategy& strategy) = 0;
  // The layer's forward (or, `backward`, its backward) is done: what layer() gathered may go, and the
  // gradients go where they belong.
  virtual void layer_done(Backend& be, int layer, const Strategy& strategy, bool backward) = 0;
};

// The forward and backward of `micro_batch` (its tokens, documents, batch and plan) on this rank's
// tokens and targets [b, s/p]: its summed loss added into `loss`, its gradients sent where `weights`
// says. The final norm's weights are `shards`'.
void forward_backward(Backend& be, const StepSpec& micro_batch, ModelShards& shards, WeightSource& weights,
                      const Tensor& tokens, const Tensor& targets, Tensor& loss);

// A weight and its gradient, for the optimizer.
using WeightAndGrad = std::pair<Tensor*, Tensor*>;

// One layer's weights as the optimizer sees them. `sharded`: weights whose shards partition them over
// the job. `replicated`: weights every rank holds whole (norms); with `sum_replicated` their gradients
// are this rank's tokens' share and are summed over the parallel group first (Megatron does so for
// layer norms under sequence parallelism), else every rank has the whole sum already.
struct OptimizerLayer {
  std::vector<WeightAndGrad> sharded;
  std::vector<WeightAndGrad> replicated;
  bool sum_replicated = false;
};

// What a step allocates before its first micro-batch, so that each micro-batch's memory is the same:
// the summed loss ([1] fp32), and the squared gradient norm's accumulator when the step clips.
struct StepTotals {
  Tensor loss, norm_squared;
};
StepTotals step_totals(Backend& be, double clip_grad_norm);

// The optimizer step once every micro-batch's gradients are in, as Megatron-LM takes it
// (optimizer/clip_grads.py): the final norm's gradients summed over the job; the squared norm of every
// gradient summed on each rank and over the job, read by the host, which scales the gradients when the
// norm exceeds `clip_grad_norm` (0: no clipping and no norm); then Adam on every weight. A replicated
// gradient counts 1/job_degree on each rank, so that it counts once (Megatron counts it on
// tensor-parallel rank 0 only: the same sum, with every rank's work alike), and a shard held by R
// shard groups (hybrid sharding) 1/R. Reads the loss last, as a
// training loop that logs it does.
void optimizer_step(Backend& be, double clip_grad_norm, ModelShards& shards,
                    std::vector<OptimizerLayer>& layers, StepTotals& totals);

}  // namespace paradyse
