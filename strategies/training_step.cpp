#include "strategies/training_step.hpp"

#include <algorithm>
#include <cmath>

#include "strategies/tracing_backend.hpp"

namespace paradyse {
namespace {

LayerWeights make_layer(Backend& be, const ModelSpec& model, int layer, bool gradients) {
  const int p = be.degree();
  const int64_t h = model.hidden;
  const std::string prefix = "layers." + std::to_string(layer) + ".";
  auto make = [&](const std::string& name, const Shape& shape) {
    return gradients ? be.gradient_buffer(shape) : be.parameter(prefix + name, shape, be.rank());
  };
  LayerWeights w;
  w.qkv = make("qkv", {(h + 2 * model.kv_hidden()) / p, h});
  w.proj = make("proj", {h / p, h});
  w.mlp_in = make("mlp_in", {model.mlp_in_rows() / p, h});
  w.mlp_out = make("mlp_out", {model.ffn_hidden / p, h});
  w.norm1_gamma = make("norm1.gamma", {h});
  w.norm2_gamma = make("norm2.gamma", {h});
  if (model.norm == NormKind::layer_norm) {
    w.norm1_beta = make("norm1.beta", {h});
    w.norm2_beta = make("norm2.beta", {h});
  }
  return w;
}

// Norm weights are replicated, so their gradients (summed over this rank's tokens) are all-reduced
// once per step, as Megatron does for layer norms under sequence parallelism. A layer that replicates
// tokens has summed over all of them on every rank already, as Megatron's tensor parallelism without
// sequence parallelism does, and reduces nothing.
void reduce_replicated(Backend& be, std::vector<Tensor*> grads) {
  for (Tensor* grad : grads)
    if (grad->defined()) *grad = be.all_reduce(*grad);
}

void update(Backend& be, Tensor& weight, const Tensor& grad) {
  if (weight.defined()) be.adam_step(weight, grad);
}

// One micro-batch's forward and backward: its loss added into `loss`, its gradients into the shards'.
void forward_backward(Backend& be, const StepSpec& spec, ModelShards& shards, const Tensor& tokens,
                      const Tensor& targets, Tensor& loss) {
  const ModelSpec& model = *spec.model;
  const int num_layers = static_cast<int>(spec.plan.size());
  const SequenceLayout layout = step_layout(spec, be.degree());
  const int64_t vocab = padded_vocab(model, be.degree());

  be.begin_phase(Phase::embedding_forward, -1);
  be.label("embedding");
  Tensor x;
  {
    Tensor table = be.all_gather(shards.embedding, 0);  // [V, h]
    x = be.embedding(tokens, table);                    // [b, s/p, h]
  }

  std::vector<std::unique_ptr<LayerSaved>> saved(static_cast<std::size_t>(num_layers));
  for (int layer = 0; layer < num_layers; ++layer) {
    be.begin_phase(Phase::layer_forward, layer);
    const LayerChoice& choice = spec.plan[static_cast<std::size_t>(layer)];
    const LayerContext ctx{model, layout, spec.batch, choice.recompute};
    LayerForward out =
        layer_forward(be, *choice.strategy, ctx, shards.layers[static_cast<std::size_t>(layer)], x);
    x = std::move(out.y);
    saved[static_cast<std::size_t>(layer)] = std::move(out.saved);
  }

  // Final norm, then head and loss over chunks of the local tokens, fused with their gradient.
  be.begin_phase(Phase::head, -1);
  be.label("final_norm");
  NormOutput final_norm = be.norm_forward(x, shards.final_norm_gamma, shards.final_norm_beta, model.norm);
  be.label("head");
  Tensor& head = model.tied_embeddings ? shards.embedding : shards.head;
  Tensor& head_grad = model.tied_embeddings ? shards.embedding_grad : shards.head_grad;
  Tensor d_normed;
  {
    Tensor table = be.all_gather(head, 0);  // [V, h]
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
    be.add_(head_grad, be.reduce_scatter(d_table, 0));
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
    const LayerContext ctx{model, layout, spec.batch, spec.plan[index].recompute};
    d_x = layer_backward(be, *spec.plan[index].strategy, ctx, shards.layers[index], std::move(saved[index]),
                         d_x, shards.layer_grads[index]);
  }

  be.begin_phase(Phase::embedding_backward, -1);
  be.label("embedding");
  Tensor d_table = be.embedding_backward(d_x, tokens, vocab);
  d_x = Tensor();
  be.add_(shards.embedding_grad, be.reduce_scatter(d_table, 0));
}

}  // namespace

int64_t padded_vocab(const ModelSpec& model, int degree) {
  return (model.vocab + degree - 1) / degree * degree;
}

SequenceLayout step_layout(const StepSpec& spec, int degree) {
  if (spec.documents.empty()) return SequenceLayout(spec.tokens, degree, spec.model->causal);
  SequenceLayout layout(spec.documents, degree, spec.model->causal);
  PARADYSE_CHECK(layout.tokens() == spec.tokens, "a packed sequence's documents must sum to its tokens");
  return layout;
}

ModelShards::ModelShards(Backend& be, const ModelSpec& model, int num_layers) {
  const int64_t rows = padded_vocab(model, be.degree()) / be.degree();
  embedding = be.parameter("embedding", {rows, model.hidden}, be.rank());
  embedding_grad = be.gradient_buffer({rows, model.hidden});
  if (!model.tied_embeddings) {
    head = be.parameter("head", {rows, model.hidden}, be.rank());
    head_grad = be.gradient_buffer({rows, model.hidden});
  }
  final_norm_gamma = be.parameter("final_norm.gamma", {model.hidden}, be.rank());
  final_norm_gamma_grad = be.gradient_buffer({model.hidden});
  if (model.norm == NormKind::layer_norm) {
    final_norm_beta = be.parameter("final_norm.beta", {model.hidden}, be.rank());
    final_norm_beta_grad = be.gradient_buffer({model.hidden});
  }
  for (int layer = 0; layer < num_layers; ++layer) {
    layers.push_back(make_layer(be, model, layer, false));
    layer_grads.push_back(make_layer(be, model, layer, true));
  }
}

std::vector<Tensor*> ModelShards::gradients() {
  std::vector<Tensor*> all{&embedding_grad, &head_grad, &final_norm_gamma_grad, &final_norm_beta_grad};
  for (LayerWeights& g : layer_grads)
    for (Tensor* t : {&g.qkv, &g.proj, &g.mlp_in, &g.mlp_out, &g.norm1_gamma, &g.norm1_beta, &g.norm2_gamma,
                      &g.norm2_beta})
      all.push_back(t);
  return all;
}

Tensor training_step(Backend& be, const StepSpec& spec, ModelShards& shards, const Tensor& tokens,
                     const Tensor& targets) {
  const int num_layers = static_cast<int>(spec.plan.size());
  PARADYSE_CHECK(static_cast<int>(shards.layers.size()) >= num_layers,
                 "fewer layer shards than plan entries");
  PARADYSE_CHECK(spec.micro_batches >= 1 && tokens.size(0) == spec.micro_batches * spec.batch,
                 "tokens of " + to_string(tokens.shape()) + " for " + std::to_string(spec.micro_batches) +
                     " micro-batches of " + std::to_string(spec.batch));
  // Allocated before the first micro-batch, so that each one's memory is the same.
  Tensor loss = be.zeros({1}, DType::fp32);
  const bool clips = spec.clip_grad_norm > 0;
  Tensor norm_squared = clips ? be.zeros({1}, DType::fp32) : Tensor();
  for (int64_t i = 0; i < spec.micro_batches; ++i)
    forward_backward(be, spec, shards, be.slice(tokens, 0, i * spec.batch, spec.batch),
                     be.slice(targets, 0, i * spec.batch, spec.batch), loss);

  // Megatron-LM's optimizer step (optimizer/clip_grads.py): the replicated gradients summed over the
  // ranks, the squared norm of every gradient summed on each rank and over the ranks, read by the
  // host, which scales the gradients when the norm exceeds the clip; then Adam on every weight. A
  // gradient every rank holds whole counts 1/p on each, so that it counts once (Megatron counts it
  // on tensor-parallel rank 0 only: the same sum, with every rank's work alike).
  const double replicated_share = 1.0 / be.degree();
  const auto add_norm = [&](std::vector<Tensor*> sharded, std::vector<Tensor*> replicated) {
    if (!clips) return;
    for (auto [grads, weight] : {std::pair{&sharded, 1.0}, {&replicated, replicated_share}}) {
      std::vector<Tensor> defined;
      for (Tensor* grad : *grads)
        if (grad->defined()) defined.push_back(*grad);
      be.add_(norm_squared, be.sum_of_squares(defined, weight));
    }
  };
  for (int layer = 0; layer < num_layers; ++layer) {
    be.begin_phase(Phase::optimizer, layer);
    be.label("gradients");
    LayerWeights& g = shards.layer_grads[static_cast<std::size_t>(layer)];
    if (!spec.plan[static_cast<std::size_t>(layer)].strategy->replicates_tokens())
      reduce_replicated(be, {&g.norm1_gamma, &g.norm1_beta, &g.norm2_gamma, &g.norm2_beta});
    add_norm({&g.qkv, &g.proj, &g.mlp_in, &g.mlp_out},
             {&g.norm1_gamma, &g.norm1_beta, &g.norm2_gamma, &g.norm2_beta});
  }
  be.begin_phase(Phase::optimizer, -1);
  be.label("gradients");
  reduce_replicated(be, {&shards.final_norm_gamma_grad, &shards.final_norm_beta_grad});
  if (clips) {
    add_norm({&shards.embedding_grad, &shards.head_grad},
             {&shards.final_norm_gamma_grad, &shards.final_norm_beta_grad});
    be.label("clip");
    const double norm = std::sqrt(be.read_scalar(be.all_reduce(norm_squared)));
    norm_squared = Tensor();
    const double coefficient = spec.clip_grad_norm / (norm + 1e-6);
    if (coefficient < 1) {
      std::vector<Tensor> grads;
      for (Tensor* grad : shards.gradients())
        if (grad->defined()) grads.push_back(*grad);
      be.scale_(grads, coefficient);
    }
  }
  for (int layer = 0; layer < num_layers; ++layer) {
    be.begin_phase(Phase::optimizer, layer);
    be.label("optimizer");
    LayerWeights& w = shards.layers[static_cast<std::size_t>(layer)];
    LayerWeights& g = shards.layer_grads[static_cast<std::size_t>(layer)];
    for (auto [weight, grad] : {std::pair{&w.qkv, &g.qkv},
                                {&w.proj, &g.proj},
                                {&w.mlp_in, &g.mlp_in},
                                {&w.mlp_out, &g.mlp_out},
                                {&w.norm1_gamma, &g.norm1_gamma},
                                {&w.norm1_beta, &g.norm1_beta},
                                {&w.norm2_gamma, &g.norm2_gamma},
                                {&w.norm2_beta, &g.norm2_beta}})
      update(be, *weight, *grad);
  }
  be.begin_phase(Phase::optimizer, -1);
  be.label("optimizer");
  update(be, shards.embedding, shards.embedding_grad);
  update(be, shards.head, shards.head_grad);
  update(be, shards.final_norm_gamma, shards.final_norm_gamma_grad);
  update(be, shards.final_norm_beta, shards.final_norm_beta_grad);
  // A training loop reads the loss to log it: the host waits for the step to end.
  be.label("loss");
  be.read_scalar(loss);
  return loss;
}

int64_t micro_batch_input_bytes(const StepSpec& spec, int degree) {
  return 2 * spec.batch * (spec.tokens / degree) * static_cast<int64_t>(sizeof(int64_t));
}

Program trace_training_step(const StepSpec& spec, int rank, int degree) {
  TracingBackend be(rank, degree);
  {
    ModelShards shards(be, *spec.model, static_cast<int>(spec.plan.size()));
    const int64_t sequences = spec.micro_batches * spec.batch;
    Tensor tokens = be.zeros({sequences, spec.tokens / degree}, DType::int64);
    Tensor targets = be.zeros({sequences, spec.tokens / degree}, DType::int64);
    training_step(be, spec, shards, tokens, targets);
  }
  return be.take_program();
}

}  // namespace paradyse
