#include "strategies/layer.hpp"

namespace paradyse {
namespace {

MaskStream mask_stream(const Strategy& strategy) {
  return strategy.replicates_tokens() ? MaskStream::replicated : MaskStream::per_rank;
}

// This rank's s/p tokens of a tensor every rank holds whole: its block of the all-gathered order,
// copied so that the whole tensor can be freed (Megatron's scatter to the sequence-parallel region
// likewise copies its slice).
Tensor own_tokens(Backend& be, const Tensor& whole) {
  const int64_t local = whole.size(1) / be.degree();
  return be.concat({be.slice(whole, 1, be.rank() * local, local)}, 1);
}

// The forward that keeps what backward needs; x is the layer input [b, s/p, h], the result the
// layer output of the same shape.
Tensor forward_saving(Backend& be, const Strategy& strategy, const LayerContext& ctx, const LayerWeights& w,
                      const Tensor& x, LayerSaved& saved) {
  const ModelSpec& model = ctx.model;
  const MaskStream stream = mask_stream(strategy);
  if (strategy.replicates_tokens()) {
    be.label("gather");
    saved.x = be.all_gather(x, 1);  // [b, s, h] on every rank
  } else {
    saved.x = x;
  }
  be.label("norm1");
  NormOutput norm1 = be.norm_forward(saved.x, w.norm1_gamma, w.norm1_beta, model.norm);
  SublayerOutput attention = strategy.attention_forward(be, ctx, w, norm1.y);
  norm1.y = Tensor();  // the attention keeps its input if its backward needs it
  saved.norm1 = std::move(norm1);
  saved.attention = std::move(attention.saved);
  be.label("residual1");
  if (model.hidden_dropout > 0) {
    DropoutOutput dropped = be.dropout(attention.y, model.hidden_dropout, stream);
    saved.dropout1_mask = dropped.mask;
    attention.y = dropped.y;
  }
  saved.h1 = be.add(saved.x, attention.y);
  attention.y = Tensor();

  be.label("norm2");
  NormOutput norm2 = be.norm_forward(saved.h1, w.norm2_gamma, w.norm2_beta, model.norm);
  SublayerOutput mlp = strategy.mlp_forward(be, ctx, w, norm2.y);
  norm2.y = Tensor();
  saved.norm2 = std::move(norm2);
  saved.mlp = std::move(mlp.saved);
  be.label("residual2");
  if (model.hidden_dropout > 0) {
    DropoutOutput dropped = be.dropout(mlp.y, model.hidden_dropout, stream);
    saved.dropout2_mask = dropped.mask;
    mlp.y = dropped.y;
  }
  Tensor y = be.add(saved.h1, mlp.y);
  if (!strategy.replicates_tokens()) return y;
  be.label("slice");
  return own_tokens(be, y);
}

void accumulate_norm_grads(Backend& be, const NormGrads& grads, Tensor& gamma, Tensor& beta) {
  be.add_(gamma, grads.d_gamma);
  if (grads.d_beta.defined()) be.add_(beta, grads.d_beta);
}

bool recomputes(const Strategy& strategy, const LayerContext& ctx) {
  return rerun(strategy, ctx.recompute) == Rerun::layer;
}

}  // namespace

Rerun rerun(const Strategy& strategy, Recompute recompute) {
  if (strategy.always_recomputes() || recompute == Recompute::full) return Rerun::layer;
  return recompute == Recompute::selective ? Rerun::attention : Rerun::nothing;
}

LayerForward layer_forward(Backend& be, const Strategy& strategy, const LayerContext& ctx,
                           const LayerWeights& w, const Tensor& x) {
  auto saved = std::make_unique<LayerSaved>();
  Tensor y = forward_saving(be, strategy, ctx, w, x, *saved);
  if (recomputes(strategy, ctx)) {  // backward runs the forward again from x alone
    saved = std::make_unique<LayerSaved>();
    saved->x = x;
  }
  return {std::move(y), std::move(saved)};
}

Tensor layer_backward(Backend& be, const Strategy& strategy, const LayerContext& ctx, const LayerWeights& w,
                      std::unique_ptr<LayerSaved> saved, const Tensor& d_y, LayerWeights& grads) {
  const ModelSpec& model = ctx.model;
  if (recomputes(strategy, ctx)) {
    be.label("recompute");
    Tensor x = std::move(saved->x);
    forward_saving(be, strategy, ctx, w, x, *saved);  // its output is not needed again
  }

  // Every rank's slice of y came from the same whole y, so the whole gradient is their concatenation.
  Tensor d_out = d_y;
  if (strategy.replicates_tokens()) {
    be.label("slice");
    d_out = be.all_gather(d_y, 1);
  }
  // y = h1 + dropout(mlp(norm2(h1)))
  Tensor d_mlp = d_out;
  be.label("residual2");
  if (saved->dropout2_mask.defined())
    d_mlp = be.dropout_backward(d_out, saved->dropout2_mask, model.hidden_dropout);
  Tensor d_norm2 = strategy.mlp_backward(be, ctx, w, *saved->mlp, d_mlp, grads);
  saved->mlp.reset();
  d_mlp = Tensor();
  be.label("norm2");
  NormGrads norm2 = be.norm_backward(d_norm2, saved->h1, w.norm2_gamma, saved->norm2, model.norm);
  d_norm2 = Tensor();
  saved->h1 = Tensor();
  saved->norm2 = {};
  accumulate_norm_grads(be, norm2, grads.norm2_gamma, grads.norm2_beta);
  Tensor d_h1 = be.add(d_out, norm2.d_x);
  d_out = Tensor();
  norm2 = {};

  // h1 = x + dropout(attention(norm1(x)))
  Tensor d_attention = d_h1;
  be.label("residual1");
  if (saved->dropout1_mask.defined())
    d_attention = be.dropout_backward(d_h1, saved->dropout1_mask, model.hidden_dropout);
  Tensor d_norm1 = strategy.attention_backward(be, ctx, w, *saved->attention, d_attention, grads);
  saved->attention.reset();
  d_attention = Tensor();
  be.label("norm1");
  NormGrads norm1 = be.norm_backward(d_norm1, saved->x, w.norm1_gamma, saved->norm1, model.norm);
  d_norm1 = Tensor();
  saved.reset();
  accumulate_norm_grads(be, norm1, grads.norm1_gamma, grads.norm1_beta);
  Tensor d_x = be.add(d_h1, norm1.d_x);
  if (!strategy.replicates_tokens()) return d_x;
  // Every rank computed the same whole gradient of the gathered input: its own slice is the gradient
  // of its shard.
  be.label("gather");
  return own_tokens(be, d_x);
}

}  // namespace paradyse
