// Shared pieces of the real backend's tests: small models, token placement by layout, and the
// relative error the comparisons state their tolerance in.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "real_backend/torch_backend.hpp"
#include "strategies/sequence_layout.hpp"
#include "strategies/training_step.hpp"

namespace paradyse::testing {

// float32 agreement with the one-device reference: max |a − b| / max |b| over the tensor.
constexpr double kFloat32Tolerance = 1e-4;

inline double relative_error(const at::Tensor& actual, const at::Tensor& expected) {
  const double scale = expected.abs().max().item<double>();
  return (actual.to(at::kFloat) - expected.to(at::kFloat)).abs().max().item<double>() /
         (scale > 0 ? scale : 1.0);
}

// MHA with GELU and LayerNorm, or GQA (two query heads per key/value head) with SwiGLU, RMSNorm and
// rotary position embeddings (a base small enough that the 8 dims' angles all turn within a few
// dozen tokens): 8 heads so that 2 and 4 ranks divide heads and key/value heads.
inline ModelSpec tiny_model(bool gqa, bool causal, int num_layers = 2) {
  ModelSpec m;
  m.name = gqa ? "tiny-gqa" : "tiny-mha";
  m.hidden = 64;
  m.heads = 8;
  m.kv_heads = gqa ? 4 : 8;
  m.ffn_hidden = gqa ? 96 : 128;
  m.num_layers = num_layers;
  m.vocab = 45;  // not a multiple of the degree: the padded rows take part
  m.causal = causal;
  m.mlp = gqa ? MlpKind::swiglu : MlpKind::gelu;
  m.norm = gqa ? NormKind::rms_norm : NormKind::layer_norm;
  m.tied_embeddings = gqa;
  m.rotary = gqa;
  m.rope_theta = 100;
  m.hidden_dropout = 0;
  return m;
}

// Rank `rank`'s tokens of x [b, s, ...] (sequence in dim 1), in its local order.
inline at::Tensor local_tokens(const at::Tensor& x, const SequenceLayout& layout, int rank) {
  std::vector<at::Tensor> parts;
  for (const TokenRange& r : layout.local(rank)) parts.push_back(x.narrow(1, r.begin, r.length));
  return at::cat(parts, 1);
}

// The whole sequence from every rank's local tokens.
inline at::Tensor place_tokens(const std::vector<at::Tensor>& locals, const SequenceLayout& layout) {
  Shape shape(locals[0].sizes().begin(), locals[0].sizes().end());
  shape[1] = layout.tokens();
  at::Tensor whole = at::empty(shape, locals[0].options());
  for (int rank = 0; rank < layout.degree(); ++rank) {
    int64_t offset = 0;
    for (const TokenRange& r : layout.local(rank)) {
      whole.narrow(1, r.begin, r.length)
          .copy_(locals[static_cast<std::size_t>(rank)].narrow(1, offset, r.length));
      offset += r.length;
    }
  }
  return whole;
}

inline at::Tensor torch_of(const Tensor& t) {
  // On the host, where the reference and the assertions are, whatever device the backend ran on.
  return real::TorchBackend::unwrap(t).detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace paradyse::testing
