#include "tests/real_backend/reference_model.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "strategies/training_step.hpp"

namespace paradyse::testing {
namespace {

constexpr double kEpsilon = 1e-5;

std::string layer_name(int layer, const std::string& name) {
  return "layers." + std::to_string(layer) + "." + name;
}

at::Tensor norm(const ModelSpec& model, const at::Tensor& x, const at::Tensor& gamma,
                const at::Tensor& beta) {
  if (model.norm == NormKind::layer_norm) return at::layer_norm(x, {model.hidden}, gamma, beta, kEpsilon);
  return x * at::rsqrt(x.pow(2).mean(-1, true) + kEpsilon) * gamma;
}

at::Tensor attention(const ModelSpec& model, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t group = model.heads / model.kv_heads, s = q.size(1);
  const at::Tensor qh = q.permute({0, 2, 1, 3});
  const at::Tensor kh = k.permute({0, 2, 1, 3}).repeat_interleave(group, 1);
  const at::Tensor vh = v.permute({0, 2, 1, 3}).repeat_interleave(group, 1);
  at::Tensor scores = at::matmul(qh, kh.transpose(-1, -2)) / std::sqrt(static_cast<double>(model.head_dim()));
  if (model.causal)
    scores = scores.masked_fill(at::ones({s, s}, at::kBool).triu(1), -std::numeric_limits<float>::infinity());
  return at::matmul(at::softmax(scores, -1), vh).permute({0, 2, 1, 3});  // [b, s, a, d]
}

// Rotary position embedding of q or k [b, s, heads, d] at positions 0 … s − 1, as transformers' Llama
// writes it: x · cos + rotate_half(x) · sin, with the angles of the pair (i, i + d/2) in both halves.
at::Tensor rotary(const ModelSpec& model, const at::Tensor& x) {
  if (!model.rotary) return x;
  const int64_t s = x.size(1), d = x.size(3);
  const at::Tensor inverse_frequency =
      1.0 / at::pow(model.rope_theta, at::arange(0, d, 2, at::kDouble) / static_cast<double>(d));
  const at::Tensor angles = at::outer(at::arange(s, at::kDouble), inverse_frequency);  // [s, d/2]
  const at::Tensor both = at::cat({angles, angles}, -1).view({1, s, 1, d});
  const at::Tensor rotated_half = at::cat({-x.narrow(-1, d / 2, d / 2), x.narrow(-1, 0, d / 2)}, -1);
  return x * at::cos(both).to(x.scalar_type()) + rotated_half * at::sin(both).to(x.scalar_type());
}

at::Tensor layer(const ModelSpec& model, const NamedTensors& w, int index, const at::Tensor& x) {
  auto get = [&](const std::string& name) { return w.at(layer_name(index, name)); };
  auto optional = [&](const std::string& name) {
    auto it = w.find(layer_name(index, name));
    return it == w.end() ? at::Tensor() : it->second;
  };
  const int64_t b = x.size(0), s = x.size(1), h = model.hidden, h_kv = model.kv_hidden(),
                d = model.head_dim();
  const at::Tensor qkv =
      at::matmul(norm(model, x, get("norm1.gamma"), optional("norm1.beta")), get("qkv").t());
  const at::Tensor q = rotary(model, qkv.narrow(2, 0, h).reshape({b, s, model.heads, d}));
  const at::Tensor k = rotary(model, qkv.narrow(2, h, h_kv).reshape({b, s, model.kv_heads, d}));
  const at::Tensor v = qkv.narrow(2, h + h_kv, h_kv).reshape({b, s, model.kv_heads, d});
  const at::Tensor h1 = x + at::matmul(attention(model, q, k, v).reshape({b, s, h}), get("proj"));
  const at::Tensor pre =
      at::matmul(norm(model, h1, get("norm2.gamma"), optional("norm2.beta")), get("mlp_in").t());
  at::Tensor act;
  if (model.mlp == MlpKind::gelu) {
    act = at::gelu(pre, "tanh");
  } else {
    const int64_t f = model.ffn_hidden;
    act = at::silu(pre.narrow(2, 0, f)) * pre.narrow(2, f, f);
  }
  return h1 + at::matmul(act, get("mlp_out"));
}

// Fresh leaves that require gradients, so that every test differentiates its own graph.
NamedTensors leaves(const NamedTensors& weights) {
  NamedTensors out;
  for (const auto& [name, t] : weights) out[name] = t.detach().clone().requires_grad_(true);
  return out;
}

NamedTensors grads_of(const NamedTensors& leaves_by_name) {
  NamedTensors grads;
  for (const auto& [name, t] : leaves_by_name)
    if (t.grad().defined()) grads[name] = t.grad();
  return grads;
}

}  // namespace

NamedTensors reference_weights(const ModelSpec& model, int num_layers, int degree, uint64_t seed) {
  const real::ModelWeights weights(model, seed);
  const int64_t h = model.hidden, vocab = padded_vocab(model, degree);
  NamedTensors out;
  auto add = [&](const std::string& name, const Shape& shape) { out[name] = weights.full(name, shape); };
  add("embedding", {vocab, h});
  if (!model.tied_embeddings) add("head", {vocab, h});
  add("final_norm.gamma", {h});
  if (model.norm == NormKind::layer_norm) add("final_norm.beta", {h});
  for (int l = 0; l < num_layers; ++l) {
    add(layer_name(l, "qkv"), {h + 2 * model.kv_hidden(), h});
    add(layer_name(l, "proj"), {h, h});
    add(layer_name(l, "mlp_in"), {model.mlp_in_rows(), h});
    add(layer_name(l, "mlp_out"), {model.ffn_hidden, h});
    for (const char* n : {"norm1", "norm2"}) {
      add(layer_name(l, std::string(n) + ".gamma"), {h});
      if (model.norm == NormKind::layer_norm) add(layer_name(l, std::string(n) + ".beta"), {h});
    }
  }
  return out;
}

ReferenceLayer reference_layer(const ModelSpec& model, const NamedTensors& weights, int index,
                               const at::Tensor& x, const at::Tensor& d_y) {
  NamedTensors w = leaves(weights);
  at::Tensor input = x.detach().clone().requires_grad_(true);
  at::Tensor y = layer(model, w, index, input);
  y.backward(d_y);
  ReferenceLayer result{y.detach(), input.grad(), {}};
  const std::string prefix = "layers." + std::to_string(index) + ".";
  for (const auto& [name, grad] : grads_of(w))
    if (name.rfind(prefix, 0) == 0) result.grads[name.substr(prefix.size())] = grad;
  return result;
}

ReferenceStep reference_step(const ModelSpec& model, const NamedTensors& weights, int num_layers,
                             const at::Tensor& tokens, const at::Tensor& targets) {
  NamedTensors w = leaves(weights);
  at::Tensor x = at::embedding(w.at("embedding"), tokens);
  for (int l = 0; l < num_layers; ++l) x = layer(model, w, l, x);
  auto beta = w.find("final_norm.beta");
  x = norm(model, x, w.at("final_norm.gamma"), beta == w.end() ? at::Tensor() : beta->second);
  const at::Tensor& head = model.tied_embeddings ? w.at("embedding") : w.at("head");
  const at::Tensor logits = at::matmul(x, head.t());
  const at::Tensor loss = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                                 /*weight=*/{}, at::Reduction::Sum, /*ignore_index=*/-1);
  loss.backward();
  return {loss.detach().reshape({1}), grads_of(w)};
}

ReferenceStep reference_step_by_document(const ModelSpec& model, const NamedTensors& weights, int num_layers,
                                         const at::Tensor& tokens, const at::Tensor& targets,
                                         const std::vector<int64_t>& documents) {
  ReferenceStep whole{at::zeros({}), {}};
  int64_t begin = 0;
  for (const int64_t length : documents) {
    ReferenceStep part = reference_step(model, weights, num_layers, tokens.narrow(1, begin, length),
                                        targets.narrow(1, begin, length));
    whole.loss = whole.loss + part.loss;
    for (auto& [name, grad] : part.grads)
      whole.grads[name] = whole.grads.count(name) ? whole.grads[name] + grad : grad;
    begin += length;
  }
  return whole;
}

}  // namespace paradyse::testing
