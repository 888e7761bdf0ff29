#include "strategies/micro_batch_pass.hpp"

#include <algorithm>
#include <cmath>

namespace paradyse {

namespace {

// The tokens of each chunk the fused head + loss runs over (StepSpec::loss_chunk_tokens), for `tokens`
// tokens against `vocabulary_shards` shards of the vocabulary: a chunk's logits hold as many elements
// whether a rank computes them for its tokens and the whole vocabulary or for every token and its
// rows.
int64_t loss_chunk_tokens(const StepSpec& spec, int64_t tokens, int vocabulary_shards) {
  if (spec.model->loss_kernel == LossKernel::unfused) return tokens;  // Megatron's: every token at once
  return std::max(spec.loss_chunk_tokens * vocabulary_shards,
                  (tokens + spec.max_loss_chunks - 1) / spec.max_loss_chunks);
}

// The logits the loss reads: the fused kernel the head's bf16 ones, the unfused loss an fp32 copy.
Tensor loss_logits(Backend& be, const StepSpec& spec, const Tensor& logits) {
  return spec.model->loss_kernel == LossKernel::unfused ? be.cast(logits, DType::fp32) : logits;
}

// The gradient the head's GEMMs take, in bf16: the unfused loss's fp32 gradient cast back.
Tensor head_gradient(Backend& be, Tensor d_logits) {
  return d_logits.dtype() == DType::bf16 ? d_logits : be.cast(d_logits, DType::bf16);
}

// The head and loss on this rank's tokens [b, s/p, h] against the whole table, gathered; its gradient
// summed over the ranks into this rank's shard. Returns d_normed [b, s/p, h].
Tensor gathered_head(Backend& be, const StepSpec& spec, WeightSource& weights, const Tensor& normed,
                     const Tensor& targets, Tensor& loss) {
  const bool head = !spec.model->tied_embeddings;
  Tensor table = weights.table(be, head);  // [V, h]
  Tensor d_table;
  std::vector<Tensor> d_chunks;
  const int64_t local = normed.size(1), chunk_tokens = loss_chunk_tokens(spec, local, 1);
  for (int64_t start = 0; start < local; start += chunk_tokens) {
    const int64_t length = std::min(chunk_tokens, local - start);
    Tensor chunk = be.slice(normed, 1, start, length);  // [b, c, h]
    LossOutput chunk_loss =
        be.cross_entropy(loss_logits(be, spec, be.linear(chunk, table)), be.slice(targets, 1, start, length));
    be.add_(loss, chunk_loss.loss);
    const Tensor d_logits = head_gradient(be, std::move(chunk_loss.d_logits));
    d_chunks.push_back(be.matmul(d_logits, table));          // [b, c, h]
    Tensor d_table_chunk = be.weight_grad(d_logits, chunk);  // [V, h]
    if (d_table.defined())
      be.add_(d_table, d_table_chunk);
    else
      d_table = d_table_chunk;
  }
  weights.add_table_grad(be, head, d_table);
  return d_chunks.size() == 1 ? d_chunks[0] : be.concat(d_chunks, 1);
}

// Megatron-LM's output head under tensor + sequence parallelism: the ranks' tokens gathered
// (gather_from_sequence_parallel_region), each rank's logits over its V/p rows for every token, the
// vocabulary-parallel cross-entropy (the row maxima gathered, then one sum of Σ exp and the target
// logit over the ranks), the gradient by the tokens summed over the ranks into each rank's tokens.
// The head's gradient is this rank's rows' own. Each rank counts 1/p of the loss, which every rank
// computes whole. Returns d_normed [b, s/p, h].
Tensor vocabulary_parallel_head(Backend& be, const StepSpec& spec, ModelShards& shards, int64_t first_row,
                                const Tensor& normed, const Tensor& targets, Tensor& loss) {
  const bool tied = spec.model->tied_embeddings;
  const Tensor& table = tied ? shards.embedding : shards.head;  // [V/p, h]
  Tensor& table_grad = tied ? shards.embedding_grad : shards.head_grad;
  const Tensor all = be.all_gather(normed, 1), all_targets = be.all_gather(targets, 1);  // [b, s, h], [b, s]
  std::vector<Tensor> d_chunks;
  const int64_t tokens = all.size(1), chunk_tokens = loss_chunk_tokens(spec, tokens, be.degree());
  for (int64_t start = 0; start < tokens; start += chunk_tokens) {
    const int64_t length = std::min(chunk_tokens, tokens - start);
    Tensor chunk = be.slice(all, 1, start, length);  // [b, c, h]
    const Tensor chunk_targets = be.slice(all_targets, 1, start, length);
    Tensor logits = loss_logits(be, spec, be.linear(chunk, table));  // [b, c, V/p]
    const Tensor maxima = be.all_gather(be.logits_max(logits), 2);
    const Tensor sums = be.all_reduce(be.vocabulary_shard_sums(logits, chunk_targets, first_row, maxima));
    LossOutput chunk_loss =
        be.vocabulary_shard_loss(logits, chunk_targets, first_row, maxima, sums, 1.0 / be.degree());
    logits = Tensor();
    be.add_(loss, chunk_loss.loss);
    const Tensor d_logits = head_gradient(be, std::move(chunk_loss.d_logits));
    d_chunks.push_back(be.matmul(d_logits, table));        // [b, c, h], partial
    be.add_(table_grad, be.weight_grad(d_logits, chunk));  // [V/p, h]
  }
  Tensor d_all = d_chunks.size() == 1 ? d_chunks[0] : be.concat(d_chunks, 1);
  d_chunks.clear();
  return be.reduce_scatter(d_all, 1);
}

}  // namespace

void forward_backward(Backend& be, const StepSpec& micro_batch, ModelShards& shards, WeightSource& weights,
                      const Tensor& tokens, const Tensor& targets, Tensor& loss) {
  const StepSpec& spec = micro_batch;
  const ModelSpec& model = *spec.model;
  const int num_layers = static_cast<int>(spec.plan.size());
  const SequenceLayout layout = step_layout(spec, be.degree());
  const int64_t vocab = padded_vocab(model, be.shard_degree());

  // The embedding and the head run vocabulary-parallel, as Megatron-LM runs them under tensor
  // parallelism, when the micro-batch has fewer tokens than the vocabulary has rows: the ranks then
  // move the tokens' activations, b·s·h each way, instead of gathering the V·h tables and summing
  // their gradients (ZeRO-3 style, as DeepSpeed runs them), which longer micro-batches do. This rank
  // computes on its V/p rows of each table, rows first_row …, where they are.
  const int64_t rows = vocab / be.shard_degree(), first_row = be.rank() * rows;
  const bool parallel_tables =
      be.degree() > 1 && weights.tables_sharded_over_group() && spec.batch * spec.tokens < vocab;

  be.begin_phase(Phase::embedding_forward, -1);
  be.label("embedding");
  Tensor x, all_tokens;
  if (parallel_tables) {
    // Megatron-LM's VocabParallelEmbedding under sequence parallelism: each rank embeds every token
    // from its rows (zero elsewhere) and the ranks' partial embeddings are summed into each rank's
    // tokens (reduce_scatter_to_sequence_parallel_region).
    all_tokens = be.all_gather(tokens, 1);                                            // [b, s]
    x = be.reduce_scatter(be.embedding(all_tokens, shards.embedding, first_row), 1);  // [b, s/p, h]
  } else {
    Tensor table = weights.table(be, false);  // [V, h]
    x = be.embedding(tokens, table, 0);       // [b, s/p, h]
  }

  std::vector<std::unique_ptr<LayerSaved>> saved(static_cast<std::size_t>(num_layers));
  // Activation offload (Recompute::offload): a layer's saved activations are copied to host memory
  // under the next layer's forward, which then waits for the copy and frees them; they come back
  // under the next layer's backward. The last layer keeps its own.
  std::vector<int64_t> offloaded(static_cast<std::size_t>(num_layers), -1);
  const auto offloads = [&](int layer) {
    return layer + 1 < num_layers &&
           spec.plan[static_cast<std::size_t>(layer)].recompute == Recompute::offload;
  };
  int64_t mark = 0;
  for (int layer = 0; layer < num_layers; ++layer) {
    const auto index = static_cast<std::size_t>(layer);
    const LayerChoice& choice = spec.plan[index];
    be.begin_phase(Phase::layer_forward, layer, rerun(*choice.strategy, choice.recompute));
    if (layer > 0 && offloads(layer - 1)) {
      be.label("offload");
      offloaded[index - 1] = be.offload_start(mark, {saved[index - 1]->x}, {x});
    }
    const LayerContext ctx{model, layout, spec.batch, choice.recompute};
    const LayerWeights& w = weights.layer(be, layer, *choice.strategy, false);
    if (offloads(layer)) mark = be.offload_mark();
    LayerForward out = layer_forward(be, *choice.strategy, ctx, w, x);
    weights.layer_done(be, layer, *choice.strategy, false);
    if (layer > 0 && offloads(layer - 1)) {
      be.label("offload");
      be.offload_finish(offloaded[index - 1]);
    }
    x = std::move(out.y);
    saved[index] = std::move(out.saved);
  }

  // Final norm, then head and loss over chunks of the tokens, fused with their gradient.
  be.begin_phase(Phase::head, -1);
  be.label("final_norm");
  NormOutput final_norm = be.norm_forward(x, shards.final_norm_gamma, shards.final_norm_beta, model.norm);
  be.label("head");
  Tensor d_normed = parallel_tables
                        ? vocabulary_parallel_head(be, spec, shards, first_row, final_norm.y, targets, loss)
                        : gathered_head(be, spec, weights, final_norm.y, targets, loss);
  NormGrads final_grads = be.norm_backward(d_normed, x, shards.final_norm_gamma, final_norm, model.norm);
  d_normed = Tensor();
  final_norm = {};
  x = Tensor();
  be.add_(shards.final_norm_gamma_grad, final_grads.d_gamma);
  if (final_grads.d_beta.defined()) be.add_(shards.final_norm_beta_grad, final_grads.d_beta);
  Tensor d_x = std::move(final_grads.d_x);
  final_grads = {};

  for (int layer = num_layers - 1; layer >= 0; --layer) {
    const auto index = static_cast<std::size_t>(layer);
    const Strategy& strategy = *spec.plan[index].strategy;
    be.begin_phase(Phase::layer_backward, layer, rerun(strategy, spec.plan[index].recompute));
    if (offloaded[index] >= 0 || (layer > 0 && offloaded[index - 1] >= 0)) be.label("reload");
    if (offloaded[index] >= 0) be.reload_finish(offloaded[index]);
    if (layer > 0 && offloaded[index - 1] >= 0) be.reload_start(offloaded[index - 1]);
    const LayerContext ctx{model, layout, spec.batch, spec.plan[index].recompute};
    const LayerWeights& w = weights.layer(be, layer, strategy, true);
    d_x = layer_backward(be, strategy, ctx, w, std::move(saved[index]), d_x,
                         weights.layer_grads(be, layer, strategy));
    weights.layer_done(be, layer, strategy, true);
  }

  be.begin_phase(Phase::embedding_backward, -1);
  be.label("embedding");
  if (parallel_tables) {
    // This rank's rows' gradient, from every token: its own, no sum over the ranks.
    Tensor d_all = be.all_gather(d_x, 1);
    d_x = Tensor();
    be.add_(shards.embedding_grad, be.embedding_backward(d_all, all_tokens, rows, first_row));
    return;
  }
  Tensor d_table = be.embedding_backward(d_x, tokens, vocab, 0);
  d_x = Tensor();
  weights.add_table_grad(be, false, d_table);
}

StepTotals step_totals(Backend& be, double clip_grad_norm) {
  StepTotals totals;
  totals.loss = be.zeros({1}, DType::fp32);
  if (clip_grad_norm > 0) totals.norm_squared = be.zeros({1}, DType::fp32);
  return totals;
}

void optimizer_step(Backend& be, double clip_grad_norm, ModelShards& shards,
                    std::vector<OptimizerLayer>& layers, StepTotals& totals) {
  const bool clips = clip_grad_norm > 0;
  Tensor& norm_squared = totals.norm_squared;
  // Summed over the job, a shard counts once per replica of it and a replicated gradient once per rank.
  const double sharded_share = static_cast<double>(be.shard_degree()) / be.job_degree();
  const double replicated_share = 1.0 / be.job_degree();
  const auto add_norm = [&](const std::vector<WeightAndGrad>& sharded,
                            const std::vector<WeightAndGrad>& replicated) {
    if (!clips) return;
    for (auto [pairs, weight] : {std::pair{&sharded, sharded_share}, {&replicated, replicated_share}}) {
      std::vector<Tensor> defined;
      for (const WeightAndGrad& pair : *pairs)
        if (pair.second->defined()) defined.push_back(*pair.second);
      if (!defined.empty()) be.add_(norm_squared, be.sum_of_squares(defined, weight));
    }
  };
  const auto update = [&](const WeightAndGrad& pair) {
    if (pair.first->defined()) be.adam_step(*pair.first, *pair.second);
  };
  for (std::size_t layer = 0; layer < layers.size(); ++layer) {
    be.begin_phase(Phase::optimizer, static_cast<int>(layer));
    be.label("gradients");
    OptimizerLayer& l = layers[layer];
    if (l.sum_replicated)
      for (const WeightAndGrad& pair : l.replicated)
        if (pair.second->defined()) *pair.second = be.all_reduce(*pair.second);
    add_norm(l.sharded, l.replicated);
  }
  be.begin_phase(Phase::optimizer, -1);
  be.label("gradients");
  const std::vector<WeightAndGrad> tables{{&shards.embedding, &shards.embedding_grad},
                                          {&shards.head, &shards.head_grad}};
  const std::vector<WeightAndGrad> final_norm{{&shards.final_norm_gamma, &shards.final_norm_gamma_grad},
                                              {&shards.final_norm_beta, &shards.final_norm_beta_grad}};
  for (const WeightAndGrad& pair : final_norm)
    if (pair.second->defined()) *pair.second = be.job_all_reduce(*pair.second);
  double coefficient = 1;
  if (clips) {
    add_norm(tables, final_norm);
    be.label("clip");
    const double norm = std::sqrt(be.read_scalar(be.job_all_reduce(norm_squared)));
    norm_squared = Tensor();
    coefficient = clip_grad_norm / (norm + 1e-6);
  }
  // Each layer's gradients are scaled just before its update: one multi-tensor kernel's work, issued
  // per layer so that a layer's share of it is in the layer's own phase.
  const auto scale_then_update = [&](const std::vector<WeightAndGrad>& first,
                                     const std::vector<WeightAndGrad>& second) {
    if (coefficient < 1) {
      std::vector<Tensor> grads;
      for (const auto* pairs : {&first, &second})
        for (const WeightAndGrad& pair : *pairs)
          if (pair.second->defined()) grads.push_back(*pair.second);
      be.label("clip");
      be.scale_(grads, coefficient);
    }
    be.label("optimizer");
    for (const auto* pairs : {&first, &second})
      for (const WeightAndGrad& pair : *pairs) update(pair);
  };
  for (std::size_t layer = 0; layer < layers.size(); ++layer) {
    be.begin_phase(Phase::optimizer, static_cast<int>(layer));
    scale_then_update(layers[layer].sharded, layers[layer].replicated);
  }
  be.begin_phase(Phase::optimizer, -1);
  scale_then_update(tables, final_norm);
  // A training loop reads the loss to log it: the host waits for the step to end.
  be.label("loss");
  be.read_scalar(totals.loss);
}

}  // namespace paradyse
