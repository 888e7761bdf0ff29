// USP: Ulysses × ring sequence parallelism, the 2-D scheme of long-context training (Fang & Zhao 2024,
// "USP: A Unified Sequence Parallelism Approach for Long Context Generative AI", and LoongTrain's
// head × context parallelism, Gu et al. 2024), with ZeRO-3 weights. In/out [b, s/p, h].
//
// The p ranks of the group form r = p/u Ulysses groups of u consecutive ranks (one node's NVLink when
// u ≤ its GPUs); rank i of every Ulysses group makes, with the others' rank i, one ring of r members
// (stride u). Attention: q, k, v of this rank's tokens through the whole (gathered) W_qkv; an all-to-all
// inside the Ulysses group, [b, s/p, a, d] → [b, u·s/p, a/u, d], gives every rank a/u query heads (and
// a_kv/u key/value heads) of its group's u·s/p tokens; ring attention over the r groups, exactly
// MegatronCZ's (ring_attention.hpp), on those heads, each member holding its group's tokens
// (SequenceLayout::merged: the union of the group's zig-zag chunks, so causal work stays balanced); the
// output all-to-all back to [b, s/p, a, d] and the whole W_proj. Backward mirrors it: the all-to-all of
// d_out to heads, the ring backward (K, V again, the fp32 dK, dV accumulators r−1 hops to their owner),
// the all-to-all of dq, dk, dv back. The MLP is zero3's, sequence-local. u = p is UlyssesZ and u = 1
// MegatronCZ; this strategy is the splits in between, u the number in its name.
//
// Constraints: u | a and u | a_kv (its all-to-all hands out whole heads), 1 < u < p, u | p, and 1/p of
// every matrix's rows (layout_rows): p may exceed the heads, as the weights are gathered whole. This is
// how a plan goes past the head count, where the paper's 1-D strategies stop (a GQA model's 8 key/value
// heads over 16, 32 or 64 GPUs).
// Volume per layer and rank, with n = s/p tokens, h_kv = a_kv·d:
//   Ulysses: 4 all-to-alls forward (q, k, v, out) and 4 backward (d_out, dq, dk, dv) over u ranks, each of
//            b·n·(h or h_kv) elements: 2(u−1)/u·b·n·(2h + 2h_kv) elements of bus traffic, bf16;
//   ring:    r members of u·n tokens and a_kv/u key/value heads, so a block is 2·b·n·h_kv elements: K and
//            V forward and again backward, bf16, and dK, dV in fp32, r−1 hops each: 16(r−1)·b·n·h_kv
//            bytes (MegatronCZ's ring, 16(p−1)·b·n·h_kv, with r members in place of p);
//   ZeRO-3:  3(p−1)/p·Φ_layer, as MegatronCZ and UlyssesZ.
// Saved by the attention: its input, q/k/v and out in head layout, lse and out in sequence layout, as
// UlyssesZ keeps them.
#include <array>

#include "strategies/library.hpp"
#include "strategies/ring_attention.hpp"
#include "strategies/ulysses.hpp"
#include "strategies/zero3.hpp"

namespace paradyse {
namespace {

struct UspAttentionSaved final : SavedActivations {
  Tensor x;          // [b, s/p, h] normalised input: the W_qkv gradient's left operand
  ring::Saved ring;  // q [b, u·s/p, a/u, d], K and V apart, out, lse: this rank's heads of its group's tokens
  Tensor o;          // [b, s/p, a, d]: out back on this rank's tokens, the W_proj gradient's left operand
};

// Over the Ulysses group, every tensor of `x` in flight at once: [b, s/p, heads, d] → [b, u·s/p, heads/u, d]
// to heads, the reverse back to the sequence.
enum class Toward { heads, sequence };
template <std::size_t N>
std::array<Tensor, N> all_to_all(Backend& be, const RankSet& ulysses_group, Toward toward,
                                 std::array<Tensor, N> x) {
  const GroupScope scope(be, ulysses_group);
  std::array<Pending, N> pending;
  for (std::size_t i = 0; i < N; ++i)
    pending[i] = toward == Toward::heads ? ulysses::sequence_to_heads_async(be, x[i])
                                         : ulysses::heads_to_sequence_async(be, x[i]);
  for (std::size_t i = 0; i < N; ++i) x[i] = pending[i].wait();
  return x;
}

class UlyssesRing final : public zero3::Zero3MlpStrategy {
 public:
  UlyssesRing(int ulysses_degree, std::string name)
      : ulysses_degree_(ulysses_degree),
        name_(std::move(name)),
        summary_("Ulysses all-to-all inside groups of " + std::to_string(ulysses_degree) +
                 " ranks × ring attention across the groups (USP) + ZeRO-3 weights") {}

  std::string_view name() const override { return name_; }
  std::string_view summary() const override { return summary_; }

  std::optional<std::string> unsupported(const ModelSpec& model, int degree) const override {
    // Rows only: a ring member's heads are its Ulysses group's, whole; a p-th of them need not be.
    std::optional<std::string> reason = layout_rows(model, degree);
    if (reason || degree < 1) return reason;
    if (auto why = two_groups(name_, ulysses_degree_, "Ulysses", "ulysses_z", degree)) return why;
    if (auto why = whole_heads(model, ulysses_degree_))  // the all-to-all hands out whole heads
      return name_ + "'s Ulysses groups of " + std::to_string(ulysses_degree_) + ": " + *why;
    return std::nullopt;
  }

  SublayerOutput attention_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                   const Tensor& x) const override {
    auto saved = std::make_unique<UspAttentionSaved>();
    saved->x = x;
    const GroupSplit groups = split_group(be, ulysses_degree_);
    zero3::Projected local = zero3::project_qkv(be, ctx, w, x);  // [b, s/p, a | a_kv, d]
    be.label("attention");
    // All three leave together: they come from one GEMM.
    auto [q, k, v] = all_to_all<3>(be, groups.inner, Toward::heads, {local.q, local.k, local.v});
    local = {};
    saved->ring.q = std::move(q);
    saved->ring.kv = ring::KvBlock::apart(std::move(k), std::move(v));
    be.label("proj");
    Pending w_proj = zero3::gather_async(be, w, &LayerWeights::proj);  // prefetch: hidden behind attention
    be.label("attention");
    AttentionOutput attention;
    {
      const GroupScope ring_scope(be, groups.outer);
      const SequenceLayout members = ctx.layout.merged(ulysses_degree_);
      attention = ring::attention_forward(be, ring_context(ctx, members), saved->ring.q, saved->ring.kv);
    }
    auto [o] = all_to_all<1>(be, groups.inner, Toward::sequence, {attention.out});
    saved->o = std::move(o);
    saved->ring.out = std::move(attention.out);
    saved->ring.lse = std::move(attention.lse);
    Tensor y = zero3::project_out(be, ctx.model, w_proj.wait(), saved->o);  // [b, s/p, h]
    return {std::move(y), std::move(saved)};
  }

  Tensor attention_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                            SavedActivations& saved_base, const Tensor& d_y,
                            LayerWeights& grads) const override {
    auto& saved = saved_as<UspAttentionSaved>(saved_base);
    const GroupSplit groups = split_group(be, ulysses_degree_);
    Tensor d_o = zero3::project_out_backward(be, ctx.model, w, saved.o, d_y, grads);  // [b, s/p, a, d]
    saved.o = Tensor();
    be.label("attention");
    auto [d_out] = all_to_all<1>(be, groups.inner, Toward::heads, {std::move(d_o)});
    ring::Bf16Grads d;
    {
      const GroupScope ring_scope(be, groups.outer);
      const SequenceLayout members = ctx.layout.merged(ulysses_degree_);
      // Moved in: q/k/v, out and lse are freed as soon as the ring is done.
      ring::Grads ring_grads =
          ring::attention_backward(be, ring_context(ctx, members), std::move(d_out), std::move(saved.ring));
      d = ring::bf16_grads(be, ring_grads);
    }
    auto [local_q, local_k, local_v] = all_to_all<3>(be, groups.inner, Toward::sequence,
                                                     {std::move(d.d_q), std::move(d.d_k), std::move(d.d_v)});
    Tensor d_x = zero3::project_qkv_backward(be, ctx, w, saved.x, local_q, local_k, local_v, grads);
    saved.x = Tensor();
    return d_x;
  }

 private:
  static LayerContext ring_context(const LayerContext& ctx, const SequenceLayout& members) {
    return {ctx.model, members, ctx.batch, ctx.recompute};
  }

  int ulysses_degree_;
  std::string name_, summary_;
};

}  // namespace

const std::vector<const Strategy*>& usp_strategies() {
  static const UlyssesRing u2(2, "usp_u2"), u4(4, "usp_u4"), u8(8, "usp_u8");
  static const std::vector<const Strategy*> all{&u2, &u4, &u8};
  return all;
}

}  // namespace paradyse
