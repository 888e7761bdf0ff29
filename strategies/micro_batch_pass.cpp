#include "strategies/micro_batch_pass.hpp"

#include <algorithm>
#include <cmath>

namespace paradyse {

void forward_backward(Backend& be, const StepSpec& micro_batch, ModelShards& shards, WeightSource& weights,
                      const Tensor& tokens, const Tensor& targets, Tensor& loss) {
  const StepSpec& spec = micro_batch;
  const ModelSpec& model = *spec.model;
  const int num_layers = static_cast<int>(spec.plan.size());
  const SequenceLayout layout = step_layout(spec, be.degree());
  const int64_t vocab = padded_vocab(model, be.shard_degree());

  be.begin_phase(Phase::embedding_forward, -1);
  be.label("embedding");
  Tensor x;
  {
    Tensor table = weights.table(be, false);  // [V, h]
    x = be.embedding(tokens, table);          // [b, s/p, h]
  }

  std::vector<std::unique_ptr<LayerSaved>> saved(static_cast<std::size_t>(num_layers));
  for (int layer = 0; layer < num_layers; ++layer) {
    be.begin_phase(Phase::layer_forward, layer);
    const LayerChoice& choice = spec.plan[static_cast<std::size_t>(layer)];
    const LayerContext ctx{model, layout, spec.batch, choice.recompute};
    LayerForward out =
        layer_forward(be, *choice.strategy, ctx, weights.layer(be, layer, *choice.strategy), x);
    weights.layer_done(be, layer, *choice.strategy, false);
    x = std::move(out.y);
    saved[static_cast<std::size_t>(layer)] = std::move(out.saved);
  }

  // Final norm, then head and loss over chunks of the local tokens, fused with their gradient.
  be.begin_phase(Phase::head, -1);
  be.label("final_norm");
  NormOutput final_norm = be.norm_forward(x, shards.final_norm_gamma, shards.final_norm_beta, model.norm);
  be.label("head");
  const bool head = !model.tied_embeddings;
  Tensor d_normed;
  {
    Tensor table = weights.table(be, head);  // [V, h]
    Tensor d_table;
    std::vector<Tensor> d_chunks;
    const int64_t local = final_norm.y.size(1);
    const int64_t chunk_tokens =
        std::max(spec.loss_chunk_tokens, (local + spec.max_loss_chunks - 1) / spec.max_loss_chunks);
    for (int64_t start = 0; start < local; start += chunk_tokens) {
      const int64_t length = std::min(chunk_tokens, local - start);
      Tensor chunk = be.slice(final_norm.y, 1, start, length);  // [b, c, h]
      LossOutput chunk_loss = be.cross_entropy(be.linear(chunk, table), be.slice(targets, 1, start, length));
      be.add_(loss, chunk_loss.loss);
      d_chunks.push_back(be.matmul(chunk_loss.d_logits, table));          // [b, c, h]
      Tensor d_table_chunk = be.weight_grad(chunk_loss.d_logits, chunk);  // [V, h]
      if (d_table.defined())
        be.add_(d_table, d_table_chunk);
      else
        d_table = d_table_chunk;
    }
    d_normed = d_chunks.size() == 1 ? d_chunks[0] : be.concat(d_chunks, 1);
    weights.add_table_grad(be, head, d_table);
  }
  NormGrads final_grads = be.norm_backward(d_normed, x, shards.final_norm_gamma, final_norm, model.norm);
  d_normed = Tensor();
  final_norm = {};
  x = Tensor();
  be.add_(shards.final_norm_gamma_grad, final_grads.d_gamma);
  if (final_grads.d_beta.defined()) be.add_(shards.final_norm_beta_grad, final_grads.d_beta);
  Tensor d_x = std::move(final_grads.d_x);
  final_grads = {};

  for (int layer = num_layers - 1; layer >= 0; --layer) {
    be.begin_phase(Phase::layer_backward, layer);
    const auto index = static_cast<std::size_t>(layer);
    const Strategy& strategy = *spec.plan[index].strategy;
    const LayerContext ctx{model, layout, spec.batch, spec.plan[index].recompute};
    const LayerWeights& w = weights.layer(be, layer, strategy);
    d_x = layer_backward(be, strategy, ctx, w, std::move(saved[index]), d_x,
                         weights.layer_grads(be, layer, strategy));
    weights.layer_done(be, layer, strategy, true);
  }

  be.begin_phase(Phase::embedding_backward, -1);
  be.label("embedding");
  Tensor d_table = be.embedding_backward(d_x, tokens, vocab);
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
  if (clips) {
    add_norm(tables, final_norm);
    be.label("clip");
    const double norm = std::sqrt(be.read_scalar(be.job_all_reduce(norm_squared)));
    norm_squared = Tensor();
    const double coefficient = clip_grad_norm / (norm + 1e-6);
    if (coefficient < 1) {
      std::vector<Tensor> grads;
      for (const OptimizerLayer& l : layers)
        for (const auto* pairs : {&l.sharded, &l.replicated})
          for (const WeightAndGrad& pair : *pairs)
            if (pair.second->defined()) grads.push_back(*pair.second);
      for (const auto* pairs : {&tables, &final_norm})
        for (const WeightAndGrad& pair : *pairs)
          if (pair.second->defined()) grads.push_back(*pair.second);
      be.scale_(grads, coefficient);
    }
  }
  for (std::size_t layer = 0; layer < layers.size(); ++layer) {
    be.begin_phase(Phase::optimizer, static_cast<int>(layer));
    be.label("optimizer");
    for (const auto* pairs : {&layers[layer].sharded, &layers[layer].replicated})
      for (const WeightAndGrad& pair : *pairs) update(pair);
  }
  be.begin_phase(Phase::optimizer, -1);
  be.label("optimizer");
  for (const auto* pairs : {&tables, &final_norm})
    for (const WeightAndGrad& pair : *pairs) update(pair);
  // A training loop reads the loss to log it: the host waits for the step to end.
  be.label("loss");
  be.read_scalar(totals.loss);
}

}  // namespace paradyse
