// Megatron-LM tensor parallelism (Shoeybi et al. 2019), with or without sequence parallelism
// (Korthikanti et al. 2022), written once as Megatron writes its parallel linear layers: one code path
// with the sequence-parallel switch deciding only the communication at the sublayer's two ends.
// Column-parallel W_qkv / W_in and row-parallel W_proj / W_out run on this rank's heads / FFN columns.
//
// megatron_ts (with SP): in/out [b, s/p, h]; each sublayer all-gathers the sequence and
// reduce-scatters back to the shard. Backward: the conjugates (all-gather d_y, reduce-scatter d_x)
// plus a re-gather of the input for the weight gradient, hidden behind the dgrad GEMM.
// megatron_tp (without SP): in/out [b, s, h] on every rank (the layer gathers and slices around it,
// layer.hpp); each sublayer all-reduces its output forward and its input gradient backward, the
// latter behind the weight-gradient GEMM, and keeps its whole input for that GEMM.
// Both move 10(p−1)/p·b·s·h elements per layer (REFERENCE.md §2; megatron_tp's layer gathers count).
// Weight gradients stay local: no reduction.
#include <optional>

#include "strategies/core_attention.hpp"
#include "strategies/library.hpp"
#include "strategies/zero3.hpp"

namespace paradyse {
namespace {

struct AttentionSaved final : SavedActivations {
  Tensor x;                    // the sublayer input: this rank's [b, s/p, h] with SP, else [b, s, h]
  Tensor qkv;                  // [b, s, (h + 2h_kv)/p]: q, k, v of this rank's heads
  Tensor out;                  // [b, s, a/p, d]: the attention core's output, W_proj's input
  core_attention::Saved core;  // the log-sum-exp, or the unfused kernel's probabilities
};

struct MlpSaved final : SavedActivations {
  Tensor x;    // as AttentionSaved::x
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
  return {ctx.model.causal, all, all, ctx.layout.document_ends()};
}

class MegatronTensorParallel final : public Strategy {
 public:
  explicit MegatronTensorParallel(bool sequence_parallel) : sequence_parallel_(sequence_parallel) {}

  std::string_view name() const override { return sequence_parallel_ ? "megatron_ts" : "megatron_tp"; }
  std::string_view summary() const override {
    return sequence_parallel_
               ? "Megatron-LM tensor parallel + sequence parallel: all-gather/reduce-scatter of activations"
               : "Megatron-LM tensor parallel: all-reduce of activations, norms and dropout on every token";
  }
  bool replicates_tokens() const override { return !sequence_parallel_; }

  SublayerOutput attention_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                   const Tensor& x) const override {
    auto saved = std::make_unique<AttentionSaved>();
    saved->x = x;
    be.label("qkv");
    saved->qkv = be.linear(whole_sequence(be, x), w.qkv);  // [b, s, h] → [b, s, (h+2h_kv)/p]
    HeadViews heads = split_heads(be, ctx.model, saved->qkv);
    be.label("attention");
    core_attention::Forward core =
        core_attention::forward(be, ctx, heads.q, heads.k, heads.v, full_sequence_mask(ctx));
    saved->out = std::move(core.out);
    saved->core = std::move(core.saved);
    be.label("proj");
    const Tensor& out = saved->out;
    Tensor partial = be.matmul(be.view(out, {out.size(0), out.size(1), out.size(2) * out.size(3)}), w.proj);
    return {sum_partials(be, partial), std::move(saved)};
  }

  Tensor attention_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                            SavedActivations& saved_base, const Tensor& d_y,
                            LayerWeights& grads) const override {
    auto& saved = saved_as<AttentionSaved>(saved_base);
    const Tensor& out = saved.out;
    const int64_t b = out.size(0), s = out.size(1);
    be.label("proj");
    Tensor d_y_full = whole_sequence(be, d_y);   // [b, s, h]
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
    return input_grad_behind_weight_grad(be, d_qkv, w.qkv, saved.x, grads.qkv);
  }

  SublayerOutput mlp_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                             const Tensor& x) const override {
    auto saved = std::make_unique<MlpSaved>();
    saved->x = x;
    be.label("mlp_in");
    saved->pre = be.linear(whole_sequence(be, x), w.mlp_in);  // [b, s, f_in/p]
    be.label("activation");
    Tensor act = activation(be, ctx.model, saved->pre);  // [b, s, f/p]
    be.label("mlp_out");
    Tensor y = sum_partials(be, be.matmul(act, w.mlp_out));
    saved->act = std::move(act);
    return {std::move(y), std::move(saved)};
  }

  Tensor mlp_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                      SavedActivations& saved_base, const Tensor& d_y, LayerWeights& grads) const override {
    auto& saved = saved_as<MlpSaved>(saved_base);
    be.label("mlp_out");
    Tensor d_y_full = whole_sequence(be, d_y);      // [b, s, h]
    Tensor d_act = be.linear(d_y_full, w.mlp_out);  // [b, s, f/p]
    be.add_(grads.mlp_out, be.weight_grad(saved.act, d_y_full));
    saved.act = Tensor();
    d_y_full = Tensor();
    be.label("activation");
    Tensor d_pre = activation_backward(be, ctx.model, d_act, saved.pre);
    d_act = Tensor();
    saved.pre = Tensor();
    be.label("mlp_in");
    return input_grad_behind_weight_grad(be, d_pre, w.mlp_in, saved.x, grads.mlp_in);
  }

 private:
  // A sublayer's input (forward) or output gradient (backward) over the whole sequence.
  Tensor whole_sequence(Backend& be, const Tensor& x) const {
    return sequence_parallel_ ? be.all_gather(x, 1) : x;
  }

  // The row-parallel GEMM's partial sums [b, s, h], summed over ranks: this rank's shard with SP.
  Tensor sum_partials(Backend& be, const Tensor& partial) const {
    return sequence_parallel_ ? be.reduce_scatter(partial, 1) : be.all_reduce(partial);
  }

  // Of a column-parallel linear x·Wᵀ: d_x = d_out·W summed over ranks, and W's gradient d_outᵀ·x
  // added into `grad`. The reduction runs behind the weight-gradient GEMM; with SP the input is
  // re-gathered first, behind the dgrad GEMM.
  Tensor input_grad_behind_weight_grad(Backend& be, const Tensor& d_out, const Tensor& w, const Tensor& x,
                                       Tensor& grad) const {
    std::optional<Pending> x_full;
    if (sequence_parallel_) x_full.emplace(be.all_gather_async(x, 1));
    Tensor partial = be.matmul(d_out, w);  // [b, s, h]
    Pending d_x = sequence_parallel_ ? be.reduce_scatter_async(partial, 1) : be.all_reduce_async(partial);
    partial = Tensor();
    be.add_(grad, be.weight_grad(d_out, x_full ? x_full->wait() : x));
    return d_x.wait();
  }

  bool sequence_parallel_;
};

}  // namespace

const Strategy& megatron_ts() {
  static const MegatronTensorParallel strategy(true);
  return strategy;
}

const Strategy& megatron_tp() {
  static const MegatronTensorParallel strategy(false);
  return strategy;
}

}  // namespace paradyse
