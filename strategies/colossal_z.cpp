// ColossalZ: Colossal-AI ring self-attention (Li et al. 2021, "Sequence Parallelism: Long Sequence
// Training from System Perspective": RingQK, RingAV) + ZeRO-3 weights. In/out [b, s/p, h].
//
// Attention is unfused: this rank materialises the scores and probabilities of its s/p queries
// against the whole sequence, [b, a, s/p, s], so no FlashAttention and an s² activation term.
// Forward: K blocks circulate (RingQK) to fill the score row, softmax over the full row, then V blocks
// circulate (RingAV) to accumulate p·v. Backward: V circulates again for d_P and the partial dV of
// every key block, K circulates again for dq and the partial dK; the full-length dK and dV partial
// sums are all-reduced and each rank keeps its own block (Colossal-AI's way). Every K or V pass is
// ring_attention.hpp's generic ring, each block's exchange posted before its compute; only the score
// blocks are this file's. The projections and the MLP are sequence-local with ZeRO-3-gathered weights
// (zero3.hpp).
//
// Constraints: only the unified layout's (p | a, p | a_kv, p | f). GQA (a_kv < a) is supported: the
// ring carries the compact a_kv-head blocks and each block is expanded to a heads just before its
// score GEMM (Hugging Face's repeat_kv, a local copy); dK and dV are summed back over each KV head's
// query group before the all-reduce, so the reductions stay a_kv heads wide.
//
// Volume per layer (elements per GPU, ≈ 8(p−1)/p·bsh for MHA): forward (p−1) K + (p−1) V
// block sends of b·(s/p)·h_kv, backward the same again, plus two all-reduces of b·s·h_kv (dK, dV):
// exactly 4(p−1)/p·b·s·h_kv + 4(p−1)/p·b·s·h_kv = 8(p−1)/p·b·s·h_kv, i.e. 8(p−1)/p·bsh for MHA.
// Selective recomputation rebuilds the probabilities in backward: one more K ring, +(p−1)/p·b·s·h_kv.
// ZeRO-3 adds 3(N−1)/N·Φ_layer (independent of s). Saved activations: ≈ 34·sbh/p + 2·a·b·s²/p bytes
// (the probabilities P in bf16), + 3·a·b·s²/p with attention dropout (its u8 mask and the dropped
// probabilities P' that RingAV multiplies): Korthikanti's 5·a·s²·b.
#include "strategies/core_attention.hpp"
#include "strategies/library.hpp"
#include "strategies/ring_attention.hpp"
#include "strategies/zero3.hpp"

namespace paradyse {
namespace {

struct ColossalZAttentionSaved final : SavedActivations {
  Tensor x;     // [b, s/p, h] normalised input, for the W_qkv gradient
  Tensor q;     // [b, s/p, a, d]
  Tensor k, v;  // [b, s/p, a_kv, d]: this rank's blocks, circulated again in backward
  // P [b, a, s/p, s] (keys in gathered order) and, with attention dropout, its mask and P'; empty under
  // selective recomputation.
  core_attention::Saved probs;
  Tensor out;  // [b, s/p, a, d] attention output, for the W_proj gradient
};

// This rank's queries against the whole sequence in gathered order (every rank's local tokens in rank
// order), which is the column order of the score row: the mask compares positions, not indices.
AttentionMask row_mask(const LayerContext& ctx, int rank) {
  return core_attention::mask(ctx, ctx.layout.local(rank), ctx.layout.gathered());
}

// Joins blocks indexed by origin rank along `dim`, so that their order is the gathered order; the
// blocks are freed here.
Tensor concat_blocks(Backend& be, std::vector<Tensor>&& blocks, int dim) {
  std::vector<Tensor> parts = std::move(blocks);
  return parts.size() == 1 ? parts[0] : be.concat(parts, dim);
}

// Key block `origin` of a score row [b, a, s/p, s] → [b, a, s/p, s/p].
Tensor key_block(Backend& be, const Tensor& row, int origin) {
  const int64_t block = row.size(2);
  return be.slice(row, 3, origin * block, block);
}

// RingQK: the raw scores q·kᵀ of this rank's queries against every key block, [b, a, s/p, s].
Tensor ring_scores(Backend& be, const ModelSpec& model, const Tensor& q, const Tensor& k) {
  std::vector<Tensor> blocks(static_cast<std::size_t>(be.degree()));
  ring::for_each_block(be, k, [&](const ring::Step& step, const Tensor& k_block) {
    blocks[static_cast<std::size_t>(step.owner)] =
        be.scores(q, core_attention::expand_heads(be, model, k_block));  // [b, a, s/p, s/p]
  });
  // Blocks arrive in ring order r, r−1, …; the row is laid out in gathered order 0, 1, …, p−1.
  return concat_blocks(be, std::move(blocks), 3);
}

class ColossalZ final : public zero3::Zero3MlpStrategy {
 public:
  std::string_view name() const override { return "colossal_z"; }
  std::string_view summary() const override {
    return "Colossal-AI ring self-attention (materialised s/p × s scores, K then V ring) + ZeRO-3 weights";
  }

  SublayerOutput attention_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                   const Tensor& x) const override {
    const ModelSpec& model = ctx.model;
    auto saved = std::make_unique<ColossalZAttentionSaved>();
    saved->x = x;
    zero3::Projected qkv = zero3::project_qkv(be, ctx, w, x);  // q [b, s/p, a, d], k, v [b, s/p, a_kv, d]
    be.label("attention");
    Tensor scores = ring_scores(be, model, qkv.q, qkv.k);  // [b, a, s/p, s]
    be.label("proj");
    // Prefetch W_proj now: the softmax below communicates nothing, so the gather hides behind it.
    Pending w_proj = zero3::gather_async(be, w, &LayerWeights::proj);
    be.label("attention");
    core_attention::Saved probs =
        core_attention::unfused_probabilities(be, model, scores, row_mask(ctx, be.rank()));
    scores = Tensor();

    // RingAV: out = Σ over key blocks of P'[:, :, :, block]·v_block.
    Tensor out;  // [b, s/p, a, d]
    const Tensor& times_v = core_attention::times_v_operand(probs);
    ring::for_each_block(be, qkv.v, [&](const ring::Step& step, const Tensor& v_block) {
      Tensor part = be.scores_times(key_block(be, times_v, step.owner),
                                    core_attention::expand_heads(be, model, v_block));
      if (out.defined())
        be.add_(out, part);
      else
        out = std::move(part);
    });
    // Selective recomputation rebuilds P in backward; under full recomputation this forward is the
    // one that runs just before backward, so it keeps P like the plain one.
    if (ctx.recompute != Recompute::selective) saved->probs = std::move(probs);
    probs = {};

    Tensor y = zero3::project_out(be, model, w_proj.wait(), out);  // [b, s/p, h]
    saved->q = std::move(qkv.q);
    saved->k = std::move(qkv.k);
    saved->v = std::move(qkv.v);
    saved->out = std::move(out);
    return {std::move(y), std::move(saved)};
  }

  Tensor attention_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                            SavedActivations& saved_base, const Tensor& d_y,
                            LayerWeights& grads) const override {
    const ModelSpec& model = ctx.model;
    auto& saved = saved_as<ColossalZAttentionSaved>(saved_base);
    const int p = be.degree(), r = be.rank();
    const int64_t block = saved.q.size(1);                                          // s/p
    Tensor d_o = zero3::project_out_backward(be, model, w, saved.out, d_y, grads);  // [b, s/p, a, d]
    saved.out = Tensor();

    be.label("attention");
    core_attention::Saved probs = std::move(saved.probs);
    if (!probs.probs.defined())  // selective recomputation: RingQK again
      probs = core_attention::unfused_probabilities(be, model, ring_scores(be, model, saved.q, saved.k),
                                                    row_mask(ctx, r));

    // RingAV backward, V circulating again: d_P' = d_o·vᵀ per key block, and this rank's queries'
    // contribution to every block's dV, P'ᵀ·d_o.
    const Tensor& times_v = core_attention::times_v_operand(probs);
    std::vector<Tensor> d_prob_blocks(static_cast<std::size_t>(p)), d_v_blocks(static_cast<std::size_t>(p));
    ring::for_each_block(be, saved.v, [&](const ring::Step& step, const Tensor& v_block) {
      const auto i = static_cast<std::size_t>(step.owner);
      d_prob_blocks[i] =
          be.scores(d_o, core_attention::expand_heads(be, model, v_block));  // [b, a, s/p, s/p]
      d_v_blocks[i] = core_attention::reduce_heads(
          be, model, be.scores_transposed_times(key_block(be, times_v, step.owner), d_o));
    });
    saved.v = Tensor();
    d_o = Tensor();
    // [b, s, a_kv, d] partial sums over the ranks' queries; summed while the softmax backward and the
    // K ring run.
    Pending d_v_full = be.all_reduce_async(concat_blocks(be, std::move(d_v_blocks), 1));
    // d_scores [b, a, s/p, s]: the gradient of the raw scores q·kᵀ.
    Tensor d_scores =
        core_attention::unfused_scores_grad(be, model, concat_blocks(be, std::move(d_prob_blocks), 3), probs);

    // RingQK backward, K circulating again: dq = d_S·k over key blocks, and every block's dK, d_Sᵀ·q.
    Tensor d_q;  // [b, s/p, a, d]
    std::vector<Tensor> d_k_blocks(static_cast<std::size_t>(p));
    ring::for_each_block(be, saved.k, [&](const ring::Step& step, const Tensor& k_block) {
      const Tensor d_scores_block = key_block(be, d_scores, step.owner);
      Tensor part = be.scores_times(d_scores_block, core_attention::expand_heads(be, model, k_block));
      if (d_q.defined())
        be.add_(d_q, part);
      else
        d_q = std::move(part);
      d_k_blocks[static_cast<std::size_t>(step.owner)] = core_attention::reduce_heads(
          be, model, be.scores_transposed_times(d_scores_block, saved.q));  // [b, s/p, a_kv, d]
    });
    d_scores = Tensor();
    saved.q = Tensor();
    saved.k = Tensor();

    // Rank r's own tokens are block r of the gathered order: [b, s, a_kv, d] → [b, s/p, a_kv, d].
    Tensor d_k = be.slice(be.all_reduce(concat_blocks(be, std::move(d_k_blocks), 1)), 1, r * block, block);
    Tensor d_v = be.slice(d_v_full.wait(), 1, r * block, block);
    return zero3::project_qkv_backward(be, ctx, w, saved.x, d_q, d_k, d_v, grads);
  }
};

}  // namespace

const Strategy& colossal_z() {
  static const ColossalZ strategy;
  return strategy;
}

}  // namespace paradyse
