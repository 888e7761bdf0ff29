// TP × CP: Megatron-LM's tensor parallelism with sequence parallelism inside groups of t consecutive
// ranks (one node's NVLink) × context parallelism, ring attention across the r = p/t groups (Megatron
// Core's --tensor-model-parallel-size t --context-parallel-size r). In/out [b, s/p, h].
//
// Rank q is TP rank i = q mod t of its group and CP member ⌊q/t⌋ of the ring of ranks i, i + t, …. In
// the unified layout rank q holds the weight rows of head block q (and FFN block q) of p; TP rank i
// computes on the blocks i, i + t, i + 2t, … (a/t heads, f/t columns: which heads a TP rank owns is free,
// as long as W_qkv and W_proj, W_in and W_out agree), which are exactly what its ring holds. So each
// weight is all-gathered over the ring (r ranks, stride t) just before use, forward and again backward,
// and its gradient reduce-scattered back over the ring: ZeRO-3 over CP, where Megatron keeps the TP
// shard replicated over CP and all-reduces its gradient. Inside the TP group everything is MegatronTS's
// (tensor_parallel.hpp): all-gather the group's t·s/p tokens, column-parallel W_qkv, row-parallel
// W_proj and reduce-scatter, the same for the MLP. The attention core between them is a ring over the
// CP members, each holding its TP group's tokens (SequenceLayout::merged), on the TP rank's a/t query
// and a_kv/t key/value heads: MegatronCZ's ring (ring_attention.hpp), K and V apart.
//
// Constraints: the unified layout's p | a and p | a_kv (a TP rank's blocks must be whole heads), and
// 1 < t < p, t | p.
// Volume per layer and rank, with n = s/p tokens and Φ_layer the layer's matrix elements:
//   TP:     MegatronTS's 10(t−1)/t·b·(t·n)·h elements: all-gathers and reduce-scatters of [b, t·n, h];
//   ring:   r members of t·n tokens and a_kv/t heads, blocks of b·n·h_kv elements: 16(r−1)·b·n·h_kv bytes;
//   ZeRO-3: each TP shard (Φ_layer/t) gathered over r ranks forward and backward, its gradient
//           reduce-scattered: 3(r−1)/r·Φ_layer/t elements.
#include "strategies/core_attention.hpp"
#include "strategies/library.hpp"
#include "strategies/ring_attention.hpp"
#include "strategies/tensor_parallel.hpp"
#include "strategies/zero3.hpp"

namespace paradyse {
namespace {

struct TpCpAttentionSaved final : SavedActivations {
  Tensor x;          // [b, s/p, h] normalised input
  Tensor qkv;        // [b, t·s/p, (h + 2h_kv)/t]: the TP rank's q, k, v of its group's tokens
  ring::Saved ring;  // q and K, V apart as views of qkv; out [b, t·s/p, a/t, d]; lse
};

// The TP shard of matrix `m` (rows of blocks i, i + t, … of p), gathered over the ring.
Tensor gather_shard(Backend& be, const GroupSplit& groups, const LayerWeights& w, zero3::Matrix m,
                    const std::vector<int64_t>& row_groups) {
  const GroupScope ring(be, groups.outer);
  return zero3::gather(be, w, m, row_groups);
}

// Sums a TP shard's gradient over the ring onto each member's own block of it.
tensor_parallel::WeightGradSink scatter_over_ring(Backend& be, const GroupSplit& groups,
                                                  const std::vector<int64_t>& row_groups, LayerWeights& grads,
                                                  zero3::Matrix m) {
  return [&be, groups, row_groups, &grads, m](const Tensor& shard_grad) {
    const GroupScope ring(be, groups.outer);
    zero3::scatter_grad(be, shard_grad, row_groups, grads, m);
  };
}

class TensorContextParallel final : public Strategy {
 public:
  TensorContextParallel(int tensor_degree, std::string name)
      : tensor_degree_(tensor_degree),
        name_(std::move(name)),
        summary_("Megatron-LM tensor + sequence parallel inside groups of " + std::to_string(tensor_degree) +
                 " ranks × context-parallel ring attention across them, weights gathered over the ring") {}

  std::string_view name() const override { return name_; }
  std::string_view summary() const override { return summary_; }

  std::optional<std::string> unsupported(const ModelSpec& model, int degree) const override {
    // A TP rank's heads are whole p-blocks of the layout: the layout's whole heads are needed.
    std::optional<std::string> reason = Strategy::unsupported(model, degree);
    if (reason || degree < 1) return reason;
    return two_groups(name_, tensor_degree_, "tensor-parallel", "megatron_ts", degree);
  }

  SublayerOutput attention_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                   const Tensor& x) const override {
    auto saved = std::make_unique<TpCpAttentionSaved>();
    saved->x = x;
    const GroupSplit groups = split_group(be, tensor_degree_);
    const Positions tokens = member_tokens(be, ctx);
    be.label("qkv");
    Tensor w_qkv = gather_shard(be, groups, w, &LayerWeights::qkv, qkv_rows(ctx.model, be));
    {
      const GroupScope tp(be, groups.inner);
      saved->qkv = be.linear(ends_.whole_sequence(be, x), w_qkv);  // [b, t·s/p, (h + 2h_kv)/t]
      tensor_parallel::HeadViews heads = tensor_parallel::split_heads(be, ctx.model, saved->qkv);
      saved->ring.q = core_attention::rotary(be, ctx, heads.q, tokens);
      saved->ring.kv =
          ring::KvBlock::apart(core_attention::rotary(be, ctx, heads.k, tokens), std::move(heads.v));
    }
    w_qkv = Tensor();
    be.label("attention");
    AttentionOutput attention = ring_forward(be, ctx, groups, *saved);
    be.label("proj");
    Tensor w_proj = gather_shard(be, groups, w, &LayerWeights::proj, all_rows(w, &LayerWeights::proj));
    const GroupScope tp(be, groups.inner);
    const Tensor& out = attention.out;
    Tensor partial = be.matmul(be.view(out, {out.size(0), out.size(1), out.size(2) * out.size(3)}), w_proj);
    saved->ring.out = std::move(attention.out);
    saved->ring.lse = std::move(attention.lse);
    return {ends_.sum_partials(be, partial), std::move(saved)};
  }

  Tensor attention_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                            SavedActivations& saved_base, const Tensor& d_y,
                            LayerWeights& grads) const override {
    auto& saved = saved_as<TpCpAttentionSaved>(saved_base);
    const GroupSplit groups = split_group(be, tensor_degree_);
    const Shape out_shape = saved.ring.out.shape();  // [b, t·s/p, a/t, d]
    be.label("proj");
    Tensor w_proj = gather_shard(be, groups, w, &LayerWeights::proj, all_rows(w, &LayerWeights::proj));
    Tensor d_out;
    {
      const GroupScope tp(be, groups.inner);
      Tensor d_y_full = ends_.whole_sequence(be, d_y);  // [b, t·s/p, h]
      d_out = be.linear(d_y_full, w_proj);              // [b, t·s/p, h/t]
      w_proj = Tensor();
      scatter_over_ring(be, groups, all_rows(w, &LayerWeights::proj), grads, &LayerWeights::proj)(
          be.weight_grad(be.view(saved.ring.out, d_out.shape()), d_y_full));
    }
    be.label("attention");
    ring::Bf16Grads d;
    {
      const GroupScope ring_scope(be, groups.outer);
      const SequenceLayout members = ctx.layout.merged(tensor_degree_);
      // Moved in: q/k/v, out and lse are freed as soon as the ring is done.
      ring::Grads ring_grads = ring::attention_backward(be, ring_context(ctx, members),
                                                        be.view(d_out, out_shape), std::move(saved.ring));
      d_out = Tensor();
      d = ring::bf16_grads(be, ring_grads);
    }
    saved.qkv = Tensor();
    be.label("qkv");
    const Positions tokens = member_tokens(be, ctx);
    Tensor d_qkv = tensor_parallel::join_heads(be, core_attention::rotary_backward(be, ctx, d.d_q, tokens),
                                               core_attention::rotary_backward(be, ctx, d.d_k, tokens),
                                               d.d_v);  // [b, t·s/p, (h + 2h_kv)/t]
    d = {};
    const std::vector<int64_t> rows = qkv_rows(ctx.model, be);
    Tensor w_qkv = gather_shard(be, groups, w, &LayerWeights::qkv, rows);
    const GroupScope tp(be, groups.inner);
    Tensor d_x = ends_.input_grad_behind_weight_grad(
        be, d_qkv, w_qkv, saved.x, scatter_over_ring(be, groups, rows, grads, &LayerWeights::qkv));
    saved.x = Tensor();
    return d_x;
  }

  SublayerOutput mlp_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                             const Tensor& x) const override {
    const GroupSplit groups = split_group(be, tensor_degree_);
    be.label("mlp_in");
    const Tensor w_in = gather_shard(be, groups, w, &LayerWeights::mlp_in, mlp_in_rows(ctx.model, be));
    const Tensor w_out =
        gather_shard(be, groups, w, &LayerWeights::mlp_out, all_rows(w, &LayerWeights::mlp_out));
    const GroupScope tp(be, groups.inner);
    return tensor_parallel::mlp_forward(be, ctx.model, ends_, w_in, w_out, x);
  }

  Tensor mlp_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w, SavedActivations& saved,
                      const Tensor& d_y, LayerWeights& grads) const override {
    const GroupSplit groups = split_group(be, tensor_degree_);
    be.label("mlp_out");
    const std::vector<int64_t> in_rows = mlp_in_rows(ctx.model, be);
    const Tensor w_in = gather_shard(be, groups, w, &LayerWeights::mlp_in, in_rows);
    const Tensor w_out =
        gather_shard(be, groups, w, &LayerWeights::mlp_out, all_rows(w, &LayerWeights::mlp_out));
    const GroupScope tp(be, groups.inner);
    return tensor_parallel::mlp_backward(
        be, ctx.model, ends_, w_in, w_out, saved_as<tensor_parallel::MlpSaved>(saved), d_y,
        scatter_over_ring(be, groups, in_rows, grads, &LayerWeights::mlp_in),
        scatter_over_ring(be, groups, all_rows(w, &LayerWeights::mlp_out), grads, &LayerWeights::mlp_out));
  }

 private:
  // Rows of a p-shard that belong together (LayerWeights::qkv_groups), at the whole group's degree: call
  // outside the scopes.
  static std::vector<int64_t> qkv_rows(const ModelSpec& model, const Backend& be) {
    return LayerWeights::qkv_groups(model, be.degree());
  }
  static std::vector<int64_t> mlp_in_rows(const ModelSpec& model, const Backend& be) {
    return LayerWeights::mlp_in_groups(model, be.degree());
  }
  // One group: every row of a W_proj or W_out shard is its own head's or column's.
  static std::vector<int64_t> all_rows(const LayerWeights& w, zero3::Matrix m) { return {(w.*m).size(0)}; }

  AttentionOutput ring_forward(Backend& be, const LayerContext& ctx, const GroupSplit& groups,
                               const TpCpAttentionSaved& saved) const {
    const GroupScope ring_scope(be, groups.outer);
    const SequenceLayout members = ctx.layout.merged(tensor_degree_);
    return ring::attention_forward(be, ring_context(ctx, members), saved.ring.q, saved.ring.kv);
  }

  // The tokens a tensor-parallel group holds once it has gathered its ranks' own: its member's.
  Positions member_tokens(const Backend& be, const LayerContext& ctx) const {
    return ctx.model.rotary ? ctx.layout.merged(tensor_degree_).local(be.rank() / tensor_degree_)
                            : Positions{};
  }

  static LayerContext ring_context(const LayerContext& ctx, const SequenceLayout& members) {
    return {ctx.model, members, ctx.batch, ctx.recompute};
  }

  int tensor_degree_;
  std::string name_, summary_;
  tensor_parallel::Ends ends_{true};
};

}  // namespace

const std::vector<const Strategy*>& tp_cp_strategies() {
  static const TensorContextParallel t2(2, "tp_cp_t2"), t4(4, "tp_cp_t4"), t8(8, "tp_cp_t8");
  static const std::vector<const Strategy*> all{&t2, &t4, &t8};
  return all;
}

}  // namespace paradyse
