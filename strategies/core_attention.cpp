#include "strategies/core_attention.hpp"

#include <cmath>

namespace paradyse::core_attention {

Saved unfused_probabilities(Compute& be, const ModelSpec& model, const Tensor& scores,
                            const AttentionMask& mask) {
  Saved saved;
  saved.probs = be.softmax(scores, softmax_scale(model), mask);
  if (model.attention_dropout > 0) {
    DropoutOutput dropped =
        be.dropout(saved.probs, model.attention_dropout, MaskStream::per_rank);  // this rank's heads
    saved.dropout_mask = std::move(dropped.mask);
    saved.dropped_probs = std::move(dropped.y);
  }
  return saved;
}

const Tensor& times_v_operand(const Saved& saved) {
  return saved.dropped_probs.defined() ? saved.dropped_probs : saved.probs;
}

Tensor unfused_scores_grad(Compute& be, const ModelSpec& model, Tensor d_probs, Saved& saved) {
  saved.dropped_probs = Tensor();
  if (saved.dropout_mask.defined()) {
    d_probs = be.dropout_backward(d_probs, saved.dropout_mask, model.attention_dropout);
    saved.dropout_mask = Tensor();
  }
  Tensor d_scores = be.softmax_backward(d_probs, saved.probs, softmax_scale(model));
  saved.probs = Tensor();
  return d_scores;
}

double softmax_scale(const ModelSpec& model) {
  return 1.0 / std::sqrt(static_cast<double>(model.head_dim()));
}

Tensor expand_heads(Compute& be, const ModelSpec& model, const Tensor& x) {
  const int64_t group = model.heads / model.kv_heads;
  if (group == 1) return x;
  const int64_t b = x.size(0), n = x.size(1), kv_heads = x.size(2), d = x.size(3);
  const std::vector<Tensor> copies(static_cast<std::size_t>(group), be.view(x, {b, n, kv_heads, 1, d}));
  return be.view(be.concat(copies, 3), {b, n, kv_heads * group, d});  // [b, n, a_kv', group, d]
}

Tensor reduce_heads(Compute& be, const ModelSpec& model, const Tensor& x) {
  const int64_t group = model.heads / model.kv_heads;
  if (group == 1) return x;
  const int64_t b = x.size(0), n = x.size(1), kv_heads = x.size(2) / group, d = x.size(3);
  const Tensor grouped = be.view(x, {b, n, kv_heads, group, d});
  Tensor sum = be.add(be.slice(grouped, 3, 0, 1), be.slice(grouped, 3, 1, 1));  // [b, n, a_kv', 1, d]
  for (int64_t j = 2; j < group; ++j) be.add_(sum, be.slice(grouped, 3, j, 1));
  return be.view(sum, {b, n, kv_heads, d});
}

AttentionMask mask(const LayerContext& ctx, Positions queries, Positions keys) {
  return {ctx.model.causal, std::move(queries), std::move(keys), ctx.layout.document_ends(),
          ctx.model.attention_dropout};
}

AttentionMask full_sequence_mask(const LayerContext& ctx) {
  Positions keys = ctx.layout.gathered();  // two ranges per document and rank: built once, copied
  Positions queries = keys;
  return mask(ctx, std::move(queries), std::move(keys));
}

Tensor rotary(Compute& be, const LayerContext& ctx, const Tensor& x, const Positions& tokens) {
  if (!ctx.model.rotary) return x;
  return be.rotary(x, {tokens, ctx.layout.document_ends(), ctx.model.rope_theta});
}

Tensor rotary_backward(Compute& be, const LayerContext& ctx, const Tensor& d, const Positions& tokens) {
  if (!ctx.model.rotary) return d;
  return be.rotary_backward(d, {tokens, ctx.layout.document_ends(), ctx.model.rope_theta});
}

Forward forward(Compute& be, const LayerContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                const AttentionMask& mask) {
  Forward result;
  if (ctx.model.attention_kernel == AttentionKernel::flash) {
    AttentionOutput attention = be.attention_forward(q, k, v, mask);
    result.out = std::move(attention.out);
    result.saved.lse = std::move(attention.lse);
  } else {
    result.saved = unfused_probabilities(be, ctx.model, be.scores(q, expand_heads(be, ctx.model, k)), mask);
    result.out = be.scores_times(times_v_operand(result.saved), expand_heads(be, ctx.model, v));
  }
  // Under full recomputation this forward is the one that runs just before backward: it keeps all.
  if (ctx.recompute == Recompute::selective) result.saved = {};
  return result;
}

AttentionGrads backward(Compute& be, const LayerContext& ctx, const Tensor& d_out, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const AttentionMask& mask,
                        Saved saved) {
  const bool flash = ctx.model.attention_kernel == AttentionKernel::flash;
  Tensor recomputed_out;
  if (ctx.recompute == Recompute::selective) {
    be.label("attention recompute");
    if (flash) {
      AttentionOutput again = be.attention_forward(q, k, v, mask);
      saved.lse = std::move(again.lse);
      if (!out.defined()) recomputed_out = std::move(again.out);
    } else {
      saved = unfused_probabilities(be, ctx.model, be.scores(q, expand_heads(be, ctx.model, k)), mask);
    }
    be.label("attention");
  }
  if (flash)
    return be.attention_backward(d_out, q, k, v, out.defined() ? out : recomputed_out, saved.lse, mask);

  const ModelSpec& model = ctx.model;
  AttentionGrads grads;
  Tensor d_probs = be.scores(d_out, expand_heads(be, model, v));  // gradient of P' [b, a', s_q, s_k]
  grads.d_v = reduce_heads(be, model, be.scores_transposed_times(times_v_operand(saved), d_out));
  const Tensor d_scores = unfused_scores_grad(be, model, std::move(d_probs), saved);  // of S = QKᵀ
  grads.d_q = be.scores_times(d_scores, expand_heads(be, model, k));
  grads.d_k = reduce_heads(be, model, be.scores_transposed_times(d_scores, q));
  return grads;
}

}  // namespace paradyse::core_attention
