#include "real_backend/machine_speed.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

namespace paradyse::real {

AttentionShape local_attention_shape(const ModelSpec& model, int ranks) {
  AttentionShape shape;
  shape.heads = std::max<int64_t>(1, model.heads / ranks);
  shape.kv_heads = std::gcd(shape.heads, std::max<int64_t>(1, model.kv_heads / ranks));  // divides heads
  shape.head_dim = model.head_dim();
  return shape;
}

double attention_pass_s(const RankTimer& timer, TorchBackend& backend, const AttentionShape& shape,
                        bool causal, int64_t tokens, AttentionPass pass) {
  const Positions sequence{TokenRange{0, tokens}};
  const AttentionMask mask{causal, sequence, sequence, nullptr};
  const Tensor q = backend.wrap(at::randn({1, tokens, shape.heads, shape.head_dim}), DType::bf16);
  const Tensor k = backend.wrap(at::randn({1, tokens, shape.kv_heads, shape.head_dim}), DType::bf16);
  const Tensor v = backend.wrap(at::randn({1, tokens, shape.kv_heads, shape.head_dim}), DType::bf16);
  const Tensor d_out = backend.wrap(at::randn({1, tokens, shape.heads, shape.head_dim}), DType::bf16);
  return timer.median_s([&] {
    const AttentionOutput forward = backend.attention_forward(q, k, v, mask);
    if (pass == AttentionPass::forward_backward)
      backend.attention_backward(d_out, q, k, v, forward.out, forward.lse, mask);
  });
}

double reference_seconds(Communicator& communicator, TorchBackend& backend, const ModelSpec& model) {
  const RankTimer timer(communicator, 5);
  return attention_pass_s(timer, backend, local_attention_shape(model, communicator.size()), true,
                          kReferenceTokens);
}

std::string reference_description(const ModelSpec& model, int ranks) {
  const AttentionShape shape = local_attention_shape(model, ranks);
  return "TorchBackend causal attention forward + backward, q [1, " + std::to_string(kReferenceTokens) +
         ", " + std::to_string(shape.heads) + ", " + std::to_string(shape.head_dim) + "], " +
         std::to_string(shape.kv_heads) + " kv heads, on all " + std::to_string(ranks) +
         " ranks at once, the slowest rank's median of 5";
}

}  // namespace paradyse::real
