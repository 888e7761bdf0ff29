// UlyssesZ: DeepSpeed-Ulysses sequence parallelism (Jacobs et al. 2023) with ZeRO-3 weights.
// In/out [b, s/p, h]. Attention: project this rank's tokens to q, k, v through the whole (gathered)
// W_qkv, all-to-all each from sequence-sharded to head-sharded, [b, s/p, a, d] → [b, s, a/p, d], run
// attention over the whole sequence on this rank's a/p query and a_kv/p key/value heads, all-to-all
// the output back to sequence-sharded and project it through the whole W_proj. The whole sequence
// arrives in rank order of the layout's chunks (zig-zag when causal); attention masks by position
// (SequenceLayout::gathered), so no permutation is needed. Backward mirrors it: the all-to-all of
// d_out to heads, and of d_q, d_k, d_v back to the sequence. The MLP is zero3's, sequence-local.
//
// Constraints: p | a and p | a_kv (every rank attends with whole heads, and the GQA group of each of
// its query heads is among its key/value heads); the unified layout already requires both.
// Volume per layer: 4 all-to-all forward (q, k, v, out) and 4 backward (d_out,
// d_q, d_k, d_v) of b·s/p·(h or h_kv) elements each: 2(p−1)/p²·b·s·(2h + 2h_kv) elements, plus
// ZeRO-3's 3(p−1)/p·Φ_layer (each weight gathered in forward and again in backward, each gradient
// reduce-scattered once), independent of s.
#include "strategies/core_attention.hpp"
#include "strategies/library.hpp"
#include "strategies/ulysses.hpp"
#include "strategies/zero3.hpp"

namespace paradyse {
namespace {

struct UlyssesZAttentionSaved final : SavedActivations {
  Tensor x;                    // [b, s/p, h] normalised input: the W_qkv gradient's left operand
  Tensor q, k, v;              // [b, s, a/p, d], [b, s, a_kv/p, d] ×2: this rank's heads, whole sequence
  Tensor out;                  // [b, s, a/p, d]: the attention core's output, for its flash backward
  core_attention::Saved core;  // the log-sum-exp, or the unfused kernel's probabilities
  // [b, s/p, a, d]: out back on this rank's tokens, the W_proj gradient's left operand. Keeping it costs
  // 2·b·s·h/p bytes; dropping it would cost a fifth all-to-all in backward to rebuild it from `out`.
  Tensor o;
};

using ulysses::heads_to_sequence_async;
using ulysses::sequence_to_heads_async;

class UlyssesZ final : public zero3::Zero3MlpStrategy {
 public:
  std::string_view name() const override { return "ulysses_z"; }
  std::string_view summary() const override {
    return "DeepSpeed-Ulysses: all-to-all from sequence to heads around attention + ZeRO-3 weights";
  }

  std::optional<std::string> unsupported(const ModelSpec& model, int degree) const override {
    if (degree < 1) return Strategy::unsupported(model, degree);
    const std::string p = std::to_string(degree);
    if (model.heads % degree != 0)
      return "Ulysses degree " + p + " must divide the " + std::to_string(model.heads) +
             " attention heads: its all-to-all gives every rank whole query heads of the full sequence";
    if (model.kv_heads % degree != 0)
      return "Ulysses degree " + p + " must divide the " + std::to_string(model.kv_heads) +
             " key/value heads: its all-to-all gives every rank whole key/value heads of the full sequence "
             "(paradyse does not replicate key/value heads across ranks)";
    return Strategy::unsupported(model, degree);
  }

  SublayerOutput attention_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                   const Tensor& x) const override {
    auto saved = std::make_unique<UlyssesZAttentionSaved>();
    saved->x = x;
    zero3::Projected local = zero3::project_qkv(be, ctx, w, x);  // [b, s/p, a | a_kv, d]
    be.label("attention");
    // [b, s/p, a, d] → [b, s, a/p, d]; k and v [b, s/p, a_kv, d] → [b, s, a_kv/p, d]. All three leave
    // together: they come from one GEMM.
    Pending q = sequence_to_heads_async(be, local.q);
    Pending k = sequence_to_heads_async(be, local.k);
    Pending v = sequence_to_heads_async(be, local.v);
    saved->q = q.wait();
    saved->k = k.wait();
    saved->v = v.wait();
    local = {};
    be.label("proj");
    Pending w_proj = zero3::gather_async(be, w, &LayerWeights::proj);  // prefetch: hidden behind attention
    be.label("attention");
    core_attention::Forward core = core_attention::forward(be, ctx, saved->q, saved->k, saved->v,
                                                           core_attention::full_sequence_mask(ctx));
    saved->core = std::move(core.saved);
    saved->o = heads_to_sequence_async(be, core.out).wait();  // [b, s, a/p, d] → [b, s/p, a, d]
    // Only the flash backward reads the output in head layout (the unfused one reads the probabilities),
    // and under selective recomputation it runs the forward again instead.
    if (ctx.model.attention_kernel == AttentionKernel::flash && ctx.recompute != Recompute::selective)
      saved->out = std::move(core.out);
    core.out = Tensor();  // freed once sent, as the framework's would be
    Tensor y = zero3::project_out(be, ctx.model, w_proj.wait(), saved->o);  // [b, s/p, h]
    return {std::move(y), std::move(saved)};
  }

  Tensor attention_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                            SavedActivations& saved_base, const Tensor& d_y,
                            LayerWeights& grads) const override {
    auto& saved = saved_as<UlyssesZAttentionSaved>(saved_base);
    Tensor d_o = zero3::project_out_backward(be, ctx.model, w, saved.o, d_y, grads);  // [b, s/p, a, d]
    saved.o = Tensor();
    be.label("attention");
    Tensor d_out = sequence_to_heads_async(be, d_o).wait();  // [b, s/p, a, d] → [b, s, a/p, d]
    d_o = Tensor();
    AttentionGrads d =
        core_attention::backward(be, ctx, d_out, saved.q, saved.k, saved.v, saved.out,
                                 core_attention::full_sequence_mask(ctx), std::move(saved.core));
    d_out = Tensor();
    saved.q = saved.k = saved.v = saved.out = Tensor();
    // [b, s, a/p, d] → [b, s/p, a, d]; d_k and d_v [b, s, a_kv/p, d] → [b, s/p, a_kv, d].
    Pending d_q = heads_to_sequence_async(be, d.d_q);
    Pending d_k = heads_to_sequence_async(be, d.d_k);
    Pending d_v = heads_to_sequence_async(be, d.d_v);
    zero3::Projected d_local{d_q.wait(), d_k.wait(), d_v.wait()};
    d = {};
    return zero3::project_qkv_backward(be, ctx, w, saved.x, d_local.q, d_local.k, d_local.v, grads);
  }
};

}  // namespace

const Strategy& ulysses_z() {
  static const UlyssesZ strategy;
  return strategy;
}

}  // namespace paradyse
