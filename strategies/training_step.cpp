#include "strategies/training_step.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "program/tracing_backend.hpp"
#include "strategies/layer_flat_layout.hpp"
#include "strategies/micro_batch_pass.hpp"

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

// The parallel group's own shards: the unified layout's, used where they are; the embedding and head
// gathered ZeRO-3 style over the group, or used where they are by a vocabulary-parallel step.
class GroupShards final : public WeightSource {
 public:
  explicit GroupShards(ModelShards& shards) : shards_(shards) {}

  Tensor table(Backend& be, bool head) override {
    return be.all_gather(head ? shards_.head : shards_.embedding, 0);
  }
  void add_table_grad(Backend& be, bool head, const Tensor& d_table) override {
    be.add_(head ? shards_.head_grad : shards_.embedding_grad, be.reduce_scatter(d_table, 0));
  }
  bool tables_sharded_over_group() const override { return true; }
  const LayerWeights& layer(Backend&, int layer, const Strategy&, bool) override {
    return shards_.layers[static_cast<std::size_t>(layer)];
  }
  LayerWeights& layer_grads(Backend&, int layer, const Strategy&) override {
    return shards_.layer_grads[static_cast<std::size_t>(layer)];
  }
  void layer_done(Backend&, int, const Strategy&, bool) override {}

 private:
  ModelShards& shards_;
};

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

ModelShards::ModelShards(Backend& be, const ModelSpec& model, int num_layers, WeightLayout layout) {
  const int shards = be.shard_degree();  // the job's ranks unless a grouped step shards over a node
  const int rank = be.shard_rank();
  const int64_t rows = padded_vocab(model, shards) / shards;
  embedding = be.parameter("embedding", {rows, model.hidden}, rank);
  embedding_grad = be.gradient_buffer({rows, model.hidden});
  if (!model.tied_embeddings) {
    head = be.parameter("head", {rows, model.hidden}, rank);
    head_grad = be.gradient_buffer({rows, model.hidden});
  }
  final_norm_gamma = be.parameter("final_norm.gamma", {model.hidden}, rank);
  final_norm_gamma_grad = be.gradient_buffer({model.hidden});
  if (model.norm == NormKind::layer_norm) {
    final_norm_beta = be.parameter("final_norm.beta", {model.hidden}, rank);
    final_norm_beta_grad = be.gradient_buffer({model.hidden});
  }
  if (layout == WeightLayout::job) {
    const int64_t elements = layer_flat_layout(model).padded(shards) / shards;
    for (int layer = 0; layer < num_layers; ++layer) {
      flat_layers.push_back(be.parameter("layers." + std::to_string(layer) + ".flat", {elements}, rank));
      flat_layer_grads.push_back(be.gradient_buffer({elements}));
    }
    return;
  }
  PARADYSE_CHECK(be.degree() == be.job_degree() && shards == be.job_degree(),
                 "the unified layout's shards are the whole job's");
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
  for (Tensor& g : flat_layer_grads) all.push_back(&g);
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
  PARADYSE_CHECK(be.degree() == be.job_degree(), "a step on the group's own shards runs on the whole job");
  // Allocated before the first micro-batch, so that each one's memory is the same.
  StepTotals totals = step_totals(be, spec.clip_grad_norm);
  GroupShards weights(shards);
  for (int64_t i = 0; i < spec.micro_batches; ++i)
    forward_backward(be, spec, shards, weights, be.slice(tokens, 0, i * spec.batch, spec.batch),
                     be.slice(targets, 0, i * spec.batch, spec.batch), totals.loss);

  // Norm weights are replicated, so their gradients (summed over this rank's tokens) are all-reduced
  // once per step. A layer that replicates tokens has summed over all of them on every rank already,
  // as Megatron's tensor parallelism without sequence parallelism does, and reduces nothing.
  std::vector<OptimizerLayer> layers;
  for (int layer = 0; layer < num_layers; ++layer) {
    LayerWeights& w = shards.layers[static_cast<std::size_t>(layer)];
    LayerWeights& g = shards.layer_grads[static_cast<std::size_t>(layer)];
    layers.push_back(
        {{{&w.qkv, &g.qkv}, {&w.proj, &g.proj}, {&w.mlp_in, &g.mlp_in}, {&w.mlp_out, &g.mlp_out}},
         {{&w.norm1_gamma, &g.norm1_gamma},
          {&w.norm1_beta, &g.norm1_beta},
          {&w.norm2_gamma, &g.norm2_gamma},
          {&w.norm2_beta, &g.norm2_beta}},
         !spec.plan[static_cast<std::size_t>(layer)].strategy->replicates_tokens()});
  }
  optimizer_step(be, spec.clip_grad_norm, shards, layers, totals);
  return totals.loss;
}

int64_t micro_batch_input_bytes(const StepSpec& spec, int degree) {
  return 2 * spec.batch * (spec.tokens / degree) * static_cast<int64_t>(sizeof(int64_t));
}

Program trace_training_step(const StepSpec& spec, int rank, int degree) {
  TracingBackend be(rank, degree);
  if (spec.gradients_clipped) be.read_scalars_as(std::numeric_limits<double>::infinity());
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
