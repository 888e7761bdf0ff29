// The attention core of a strategy that attends over whole rows on some of the heads (MegatronTS on
// its a/p heads, UlyssesZ after its all-to-all): q [b, s_q, a', d], k and v [b, s_k, a_kv', d] →
// out [b, s_q, a', d], by the model's attention kernel (model.hpp, AttentionKernel).
//
// flash: one fused kernel each way; backward needs out and the log-sum-exp.
// unfused (Megatron-LM's DotProductAttention before FlashAttention):
//   S = QKᵀ [b, a', s_q, s_k], P = softmax(S/√d, mask), P' = dropout(P), out = P'·V;
//   backward: dP' = d_out·Vᵀ, dV = P'ᵀ·d_out, dP = dropout_backward(dP'), dS = softmax_backward(dP, P),
//   dQ = dS·K, dK = dSᵀ·Q. GQA: each KV head is copied to its query group first (Megatron and
//   transformers' repeat_kv), its gradient summed back.
// Selective recomputation (Megatron's recompute_granularity "selective": the core attention is
// checkpointed) keeps nothing of the core but its output, which the output projection needs anyway, and
// runs the core's forward again at the start of its backward. On the real backend a recomputed dropout
// draws a new mask, as full recomputation's does; Megatron restores the RNG state instead.
#pragma once

#include "strategies/strategy.hpp"

namespace paradyse::core_attention {

// The mask of queries at `queries` against keys at `keys`: the model's causality and attention dropout
// (which a fused kernel draws inside) and the layout's documents.
AttentionMask mask(const LayerContext& ctx, Positions queries, Positions keys);
// Every token against every token, in gathered order: a strategy that attends over whole rows.
AttentionMask full_sequence_mask(const LayerContext& ctx);

// The model's rotary position embedding (model.hpp) of q or k [b, n, heads, d] whose tokens sit at
// `tokens`, applied where q and k are made, before any strategy moves them; x itself for a model
// without one. The backward rotates the gradient back.
Tensor rotary(Compute& be, const LayerContext& ctx, const Tensor& x, const Positions& tokens);
Tensor rotary_backward(Compute& be, const LayerContext& ctx, const Tensor& d, const Positions& tokens);

// What the core's backward needs beyond q, k, v and out (which its caller keeps).
struct Saved {
  Tensor lse;            // flash: [b, a', s_q] fp32
  Tensor probs;          // unfused: P, the softmax's output, for its backward
  Tensor dropout_mask;   // unfused with attention dropout: u8 like P
  Tensor dropped_probs;  // unfused with attention dropout: P', the ×V GEMM's left operand
};

struct Forward {
  Tensor out;  // [b, s_q, a', d]
  Saved saved;
};

Forward forward(Compute& be, const LayerContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                const AttentionMask& mask);
// Consumes `saved` (recomputing it first under selective recomputation). `out` is the forward's output;
// only the flash kernel reads it, and under selective recomputation it may be undefined (recomputed).
AttentionGrads backward(Compute& be, const LayerContext& ctx, const Tensor& d_out, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const AttentionMask& mask,
                        Saved saved);

// The unfused kernel's pieces, which ColossalZ's ring self-attention shares.
// From the raw scores S = QKᵀ: P = softmax(S/√d, mask) and, with attention dropout, P' and its mask.
Saved unfused_probabilities(Compute& be, const ModelSpec& model, const Tensor& scores,
                            const AttentionMask& mask);
const Tensor& times_v_operand(const Saved& saved);  // P', or P without attention dropout
// dS from dP' (the gradient of ×V's left operand), releasing what `saved` held.
Tensor unfused_scores_grad(Compute& be, const ModelSpec& model, Tensor d_probs, Saved& saved);

double softmax_scale(const ModelSpec& model);  // 1/√d
// GQA for the unfused score GEMMs, which need equal heads: [b, n, a_kv', d] → [b, n, a', d], query head
// i reading KV head i / (a/a_kv); a view when a = a_kv.
Tensor expand_heads(Compute& be, const ModelSpec& model, const Tensor& x);
// Backward of expand_heads: [b, n, a', d] → [b, n, a_kv', d], summing each KV head's query group.
Tensor reduce_heads(Compute& be, const ModelSpec& model, const Tensor& x);

}  // namespace paradyse::core_attention
