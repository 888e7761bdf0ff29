// MegatronTS: Megatron-LM tensor parallelism with sequence parallelism (Korthikanti et al. 2022).
// In/out [b, s/p, h]. Each sublayer all-gathers the sequence, runs column-parallel W_qkv / W_in and
// row-parallel W_proj / W_out on this rank's heads / FFN columns, and reduce-scatters back to the
// sequence shard. Backward: the conjugates (all-gather d_y, reduce-scatter d_x) plus a re-gather of
// the input for the weight gradient, hidden behind the dgrad GEMM. Volume per layer:
// 10(p−1)/p·b·s·h elements (REFERENCE.md §2). Weight gradients stay local: no reduction.
#include "strategies/core_attention.hpp"
#include "strategies/library.hpp"
#include "strategies/zero3.hpp"

namespace paradyse {
namespace {

struct AttentionSaved final : SavedActivations {
  Tensor x;                    // [b, s/p, h] input shard, re-gathered for the W_qkv gradient
  Tensor qkv;                  // [b, s, (h + 2h_kv)/p]: q, k, v of this rank's heads
  Tensor out;                  // [b, s, a/p, d]: the attention core's output, W_proj's input
  core_attention::Saved core;  // the log-sum-exp, or the unfused kernel's probabilities
};

struct MlpSaved final : SavedActivations {
  Tensor x;    // [b, s/p, h]
  Tensor pre;  // [b, s, f_in/p]
  Tensor act;  // [b, s, f/p]
};

struct HeadViews {
  Tensor q, k, v;
};

HeadViews split_heads(Backend& be, const ModelSpec& model, const Tensor& qkv) {
  const int p = be.degree();
  const int64_t b = qkv.size(0), s = qkv.size(1), d = model.head_dim();
  const int64_t heads = model.heads / p, kv_heads = model.kv_heads / p;
  return {be.view(be.slice(qkv, 2, 0, heads * d), {b, s, heads, d}),
          be.view(be.slice(qkv, 2, heads * d, kv_heads * d), {b, s, kv_heads, d}),
          be.view(be.slice(qkv, 2, (heads + kv_heads) * d, kv_heads * d), {b, s, kv_heads, d})};
}

AttentionMask full_sequence_mask(const LayerContext& ctx) {
  Positions all = ctx.layout.gathered();
  return {ctx.model.causal, all, all};
}

class MegatronTS final : public Strategy {
 public:
  std::string_view name() const override { return "megatron_ts"; }
  std::string_view summary() const override {
    return "Megatron-LM tensor parallel + sequence parallel: all-gather/reduce-scatter of activations";
  }

  SublayerOutput attention_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                   const Tensor& x) const override {
    auto saved = std::make_unique<AttentionSaved>();
    saved->x = x;
    be.label("qkv");
    saved->qkv = be.linear(be.all_gather(x, 1), w.qkv);  // [b, s/p, h] → [b, s, h] → [b, s, (h+2h_kv)/p]
    HeadViews heads = split_heads(be, ctx.model, saved->qkv);
    be.label("attention");
    core_attention::Forward core =
        core_attention::forward(be, ctx, heads.q, heads.k, heads.v, full_sequence_mask(ctx));
    saved->out = std::move(core.out);
    saved->core = std::move(core.saved);
    be.label("proj");
    const Tensor& out = saved->out;
    Tensor partial = be.matmul(be.view(out, {out.size(0), out.size(1), out.size(2) * out.size(3)}), w.proj);
    return {be.reduce_scatter(partial, 1), std::move(saved)};  // [b, s, h] partial sums → [b, s/p, h]
  }

  Tensor attention_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                            SavedActivations& saved_base, const Tensor& d_y,
                            LayerWeights& grads) const override {
    auto& saved = saved_as<AttentionSaved>(saved_base);
    const Tensor& out = saved.out;
    const int64_t b = out.size(0), s = out.size(1);
    be.label("proj");
    Tensor d_y_full = be.all_gather(d_y, 1);     // [b, s, h]
    Tensor d_out = be.linear(d_y_full, w.proj);  // [b, s, h/p]
    be.add_(grads.proj, be.weight_grad(be.view(out, {b, s, d_out.size(2)}), d_y_full));
    d_y_full = Tensor();
    be.label("attention");
    HeadViews heads = split_heads(be, ctx.model, saved.qkv);
    AttentionGrads d = core_attention::backward(be, ctx, be.view(d_out, out.shape()), heads.q, heads.k,
                                                heads.v, out, full_sequence_mask(ctx), std::move(saved.core));
    d_out = Tensor();
    heads = {};
    saved.qkv = Tensor();
    saved.out = Tensor();
    be.label("qkv");
    Tensor d_qkv = be.concat({be.view(d.d_q, {b, s, d.d_q.size(2) * d.d_q.size(3)}),
                              be.view(d.d_k, {b, s, d.d_k.size(2) * d.d_k.size(3)}),
                              be.view(d.d_v, {b, s, d.d_v.size(2) * d.d_v.size(3)})},
                             2);  // [b, s, (h+2h_kv)/p]
    d = {};
    // Start the re-gather of x for the weight gradient now; the dgrad GEMM below hides it.
    Pending x_full = be.all_gather_async(saved.x, 1);
    Pending d_x = be.reduce_scatter_async(be.matmul(d_qkv, w.qkv), 1);  // [b, s, h] → [b, s/p, h]
    be.add_(grads.qkv, be.weight_grad(d_qkv, x_full.wait()));
    return d_x.wait();
  }

  SublayerOutput mlp_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                             const Tensor& x) const override {
    auto saved = std::make_unique<MlpSaved>();
    saved->x = x;
    be.label("mlp_in");
    saved->pre = be.linear(be.all_gather(x, 1), w.mlp_in);  // [b, s, f_in/p]
    be.label("activation");
    Tensor act = activation(be, ctx.model, saved->pre);  // [b, s, f/p]
    be.label("mlp_out");
    Tensor y = be.reduce_scatter(be.matmul(act, w.mlp_out), 1);
    saved->act = std::move(act);
    return {std::move(y), std::move(saved)};
  }

  Tensor mlp_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                      SavedActivations& saved_base, const Tensor& d_y, LayerWeights& grads) const override {
    auto& saved = saved_as<MlpSaved>(saved_base);
    be.label("mlp_out");
    Tensor d_y_full = be.all_gather(d_y, 1);        // [b, s, h]
    Tensor d_act = be.linear(d_y_full, w.mlp_out);  // [b, s, f/p]
    be.add_(grads.mlp_out, be.weight_grad(saved.act, d_y_full));
    saved.act = Tensor();
    d_y_full = Tensor();
    be.label("activation");
    Tensor d_pre = activation_backward(be, ctx.model, d_act, saved.pre);
    d_act = Tensor();
    saved.pre = Tensor();
    be.label("mlp_in");
    Pending x_full = be.all_gather_async(saved.x, 1);  // hidden behind the dgrad GEMM
    Pending d_x = be.reduce_scatter_async(be.matmul(d_pre, w.mlp_in), 1);
    be.add_(grads.mlp_in, be.weight_grad(d_pre, x_full.wait()));
    return d_x.wait();
  }
};

}  // namespace

const Strategy& megatron_ts() {
  static const MegatronTS strategy;
  return strategy;
}

}  // namespace paradyse
