// One training iteration of the whole model on one rank of a parallel group, for any per-layer plan:
// embedding, the layers (each with its own strategy), output head and loss, backward, optimizer step.
// The same code runs on the tracer (one program per rank) and on real tensors.
//
// Embedding table and output head are sharded like every weight (rows V/p per rank, vocabulary padded
// to a multiple of p). A micro-batch of fewer tokens than the vocabulary runs them vocabulary-parallel
// on the shards (Megatron-LM's VocabParallelEmbedding and vocab-parallel cross-entropy); a longer one
// gathers them ZeRO-3 style (micro_batch_pass.cpp). The loss runs over chunks of the tokens, fused
// with its gradient, so the logits never exist for the whole sequence at once.
#pragma once

#include <vector>

#include "program/program.hpp"
#include "strategies/layer.hpp"

namespace paradyse {

struct StepSpec {
  const ModelSpec* model = nullptr;
  int64_t tokens = 0;  // per sequence, already padded (SequenceLayout::padded_length)
  // A packed sequence: the lengths of its documents, each already padded (SequenceLayout::padded_lengths),
  // summing to `tokens`; attention stays within each. Empty: one document of `tokens`.
  std::vector<int64_t> documents;
  int64_t batch = 1;          // sequences per micro-batch
  int64_t micro_batches = 1;  // of a global batch: run one after another, gradients accumulating
  // The global gradient norm the optimizer clips to (Megatron-LM's --clip-grad, default 1.0); 0: no
  // clipping and no norm. The host reads the norm, and a trace has no values: gradients_clipped says
  // which branch a traced step takes. false: the norm is within the limit, the steady state where
  // clipping is rare; true: it exceeds it (as in the first steps of training) and every gradient is
  // scaled (clip_grad_norm_fp32's multi_tensor_scale). A step on real tensors clips by its own norm.
  double clip_grad_norm = 1.0;
  bool gradients_clipped = false;
  Plan plan;  // one strategy (and recomputation) per layer; plan.size() layers are run
  // The fused head + loss runs over chunks of this many local tokens, and over at most
  // max_loss_chunks chunks: a longer sequence gets longer chunks (chunked cross-entropies bound the
  // count likewise: torchtune's 8 chunks, Liger's about V/h), so that a step's program has the same
  // number of ops at any length.
  int64_t loss_chunk_tokens = 4096;
  int64_t max_loss_chunks = 64;
};

// Vocabulary rows after padding to a multiple of the degree (Megatron pads likewise).
int64_t padded_vocab(const ModelSpec& model, int degree);

// How a job holds its layers' weights. group: the unified layout over the parallel group, which is
// the whole job (training_step). job: each layer's weights one flat tensor sharded over the job's
// shard group (Groups::shard_degree: the job, or a node), for steps whose groups train different
// micro-batches (grouped_step.hpp).
enum class WeightLayout : uint8_t { group, job };

// This rank's weight shards and gradient accumulators.
struct ModelShards {
  ModelShards(Backend& be, const ModelSpec& model, int num_layers, WeightLayout layout = WeightLayout::group);

  Tensor embedding;  // [V/p, h]; also the output head when tied
  Tensor head;       // [V/p, h] when not tied
  Tensor final_norm_gamma, final_norm_beta;
  std::vector<LayerWeights> layers;  // WeightLayout::group
  Tensor embedding_grad, head_grad, final_norm_gamma_grad, final_norm_beta_grad;
  std::vector<LayerWeights> layer_grads;
  // WeightLayout::job: layer l's weights, flattened (layer_flat_layout) and padded, this rank's 1/S
  // of the shard group's S: "layers.<l>.flat" [padded / S]; and their fp32 gradient. The tables are
  // [V/S, h] then.
  std::vector<Tensor> flat_layers, flat_layer_grads;

  // Every gradient accumulator (some undefined: the head's when tied, betas under RMSNorm).
  std::vector<Tensor*> gradients();
};

// Runs one step on `be`: the forward and backward of each micro-batch in turn, then one optimizer
// step (Megatron-LM's gradient accumulation). tokens and targets are this rank's [n·b, s/p] int64 (in
// the layout's order), micro-batch i their rows i·b … (i+1)·b − 1. Returns the summed loss of the
// local tokens ([1] fp32).
Tensor training_step(Backend& be, const StepSpec& spec, ModelShards& shards, const Tensor& tokens,
                     const Tensor& targets);

// What trace_training_step's inputs hold per micro-batch on each rank: tokens and targets, int64
// [b, s/p] each.
int64_t micro_batch_input_bytes(const StepSpec& spec, int degree);

// The program rank `rank` of `degree` records for one whole step of `spec` on the tracing backend
// (weights of spec.plan.size() layers, the step's token and target inputs, the step itself).
Program trace_training_step(const StepSpec& spec, int rank, int degree);

// The layout every strategy of a step shares: zig-zag chunks for causal models.
SequenceLayout step_layout(const StepSpec& spec, int degree);

}  // namespace paradyse
