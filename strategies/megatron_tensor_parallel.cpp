// Megatron-LM tensor parallelism (Shoeybi et al. 2019), with or without sequence parallelism
// (Korthikanti et al. 2022), on the parallel linear layers of tensor_parallel.hpp over the whole group,
// the attention core over the whole sequence.
//
// megatron_ts (with SP): in/out [b, s/p, h]; each sublayer all-gathers the sequence and
// reduce-scatters back to the shard. Backward: the conjugates (all-gather d_y, reduce-scatter d_x)
// plus a re-gather of the input for the weight gradient, hidden behind the dgrad GEMM.
// megatron_tp (without SP): in/out [b, s, h] on every rank (the layer gathers and slices around it,
// layer.hpp); each sublayer all-reduces its output forward and its input gradient backward, the
// latter behind the weight-gradient GEMM, and keeps its whole input for that GEMM.
// Both move 10(p−1)/p·b·s·h elements per layer: two all-gathers and two reduce-scatters of b·s·h forward,
// the same backward, and backward's two re-gathers of the input (megatron_tp's layer gathers count).
// Weight gradients stay local: no reduction.
#include "strategies/core_attention.hpp"
#include "strategies/library.hpp"
#include "strategies/tensor_parallel.hpp"

namespace paradyse {
namespace {

using tensor_parallel::HeadViews;

struct TensorParallelAttentionSaved final : SavedActivations {
  Tensor x;                    // the sublayer input: this rank's [b, s/p, h] with SP, else [b, s, h]
  Tensor qkv;                  // [b, s, (h + 2h_kv)/p]: q, k, v of this rank's heads
  Tensor q, k;                 // as attention takes them: rotated where the model has rotary embeddings
  Tensor out;                  // [b, s, a/p, d]: the attention core's output, W_proj's input
  core_attention::Saved core;  // the log-sum-exp, or the unfused kernel's probabilities
};

class MegatronTensorParallel final : public Strategy {
 public:
  explicit MegatronTensorParallel(bool sequence_parallel) : ends_{sequence_parallel} {}

  std::string_view name() const override { return ends_.sequence_parallel ? "megatron_ts" : "megatron_tp"; }
  std::string_view summary() const override {
    return ends_.sequence_parallel
               ? "Megatron-LM tensor parallel + sequence parallel: all-gather/reduce-scatter of activations"
               : "Megatron-LM tensor parallel: all-reduce of activations, norms and dropout on every token";
  }
  bool replicates_tokens() const override { return !ends_.sequence_parallel; }

  SublayerOutput attention_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                   const Tensor& x) const override {
    auto saved = std::make_unique<TensorParallelAttentionSaved>();
    saved->x = x;
    be.label("qkv");
    saved->qkv = be.linear(ends_.whole_sequence(be, x), w.qkv);  // [b, s, h] → [b, s, (h+2h_kv)/p]
    HeadViews heads = tensor_parallel::split_heads(be, ctx.model, saved->qkv);
    const Positions all = ctx.model.rotary ? ctx.layout.gathered() : Positions{};
    saved->q = core_attention::rotary(be, ctx, heads.q, all);
    saved->k = core_attention::rotary(be, ctx, heads.k, all);
    be.label("attention");
    core_attention::Forward core = core_attention::forward(be, ctx, saved->q, saved->k, heads.v,
                                                           core_attention::full_sequence_mask(ctx));
    saved->out = std::move(core.out);
    saved->core = std::move(core.saved);
    be.label("proj");
    const Tensor& out = saved->out;
    Tensor partial = be.matmul(be.view(out, {out.size(0), out.size(1), out.size(2) * out.size(3)}), w.proj);
    return {ends_.sum_partials(be, partial), std::move(saved)};
  }

  Tensor attention_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                            SavedActivations& saved_base, const Tensor& d_y,
                            LayerWeights& grads) const override {
    auto& saved = saved_as<TensorParallelAttentionSaved>(saved_base);
    const Tensor& out = saved.out;
    const int64_t b = out.size(0), s = out.size(1);
    be.label("proj");
    Tensor d_y_full = ends_.whole_sequence(be, d_y);  // [b, s, h]
    Tensor d_out = be.linear(d_y_full, w.proj);       // [b, s, h/p]
    be.add_(grads.proj, be.weight_grad(be.view(out, {b, s, d_out.size(2)}), d_y_full));
    d_y_full = Tensor();
    be.label("attention");
    HeadViews heads = tensor_parallel::split_heads(be, ctx.model, saved.qkv);
    AttentionGrads d =
        core_attention::backward(be, ctx, be.view(d_out, out.shape()), saved.q, saved.k, heads.v, out,
                                 core_attention::full_sequence_mask(ctx), std::move(saved.core));
    d_out = Tensor();
    heads = {};
    saved.qkv = saved.q = saved.k = Tensor();
    saved.out = Tensor();
    be.label("qkv");
    const Positions all = ctx.model.rotary ? ctx.layout.gathered() : Positions{};
    Tensor d_qkv = tensor_parallel::join_heads(be, core_attention::rotary_backward(be, ctx, d.d_q, all),
                                               core_attention::rotary_backward(be, ctx, d.d_k, all),
                                               d.d_v);  // [b, s, (h+2h_kv)/p]
    d = {};
    return ends_.input_grad_behind_weight_grad(be, d_qkv, w.qkv, saved.x,
                                               tensor_parallel::add_into(be, grads.qkv));
  }

  SublayerOutput mlp_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                             const Tensor& x) const override {
    return tensor_parallel::mlp_forward(be, ctx.model, ends_, w.mlp_in, w.mlp_out, x);
  }

  Tensor mlp_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                      SavedActivations& saved_base, const Tensor& d_y, LayerWeights& grads) const override {
    return tensor_parallel::mlp_backward(
        be, ctx.model, ends_, w.mlp_in, w.mlp_out, saved_as<tensor_parallel::MlpSaved>(saved_base), d_y,
        tensor_parallel::add_into(be, grads.mlp_in), tensor_parallel::add_into(be, grads.mlp_out));
  }

 private:
  tensor_parallel::Ends ends_;
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
