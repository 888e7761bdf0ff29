// One pre-norm Transformer layer around a strategy's attention and MLP, written once for all of them:
//   h1 = x + dropout(attention(norm1(x))),   y = h1 + dropout(mlp(norm2(h1)))
// Norms, dropout and residuals act on the local [b, s/p, h] shard, so they are the same for every
// strategy; recomputation of the whole layer lives here too. A strategy that replicates tokens
// (Megatron TP without SP) gets the whole sequence instead: the layer all-gathers its input, runs
// on all s tokens alike on every rank and keeps this rank's slice of the output, so the layout
// between layers stays [b, s/p, h]. That gather, and the gather of the output gradient in backward,
// are the unified layout's price: Megatron-LM keeps the whole output on every rank between layers
// and moves 8(p−1)/p·b·s·h elements per layer where this moves 10.
#pragma once

#include <memory>

#include "strategies/strategy.hpp"

namespace paradyse {

// What the layer keeps between its forward and backward. With full recomputation only `x`.
struct LayerSaved {
  Tensor x;          // layer input (all of it when the strategy replicates tokens): norm1's input
  NormOutput norm1;  // its stats (y is held by the attention if needed)
  std::unique_ptr<SavedActivations> attention;
  Tensor dropout1_mask;
  Tensor h1;  // norm2's input, the second residual
  NormOutput norm2;
  std::unique_ptr<SavedActivations> mlp;
  Tensor dropout2_mask;
};

struct LayerForward {
  Tensor y;
  std::unique_ptr<LayerSaved> saved;
};

LayerForward layer_forward(Backend& be, const Strategy& strategy, const LayerContext& ctx,
                           const LayerWeights& w, const Tensor& x);
// Consumes `saved`; returns d_x and adds the weight gradients into `grads`.
Tensor layer_backward(Backend& be, const Strategy& strategy, const LayerContext& ctx, const LayerWeights& w,
                      std::unique_ptr<LayerSaved> saved, const Tensor& d_y, LayerWeights& grads);

// What the layer's backward runs again of its forward under `recompute` (the strategy may always
// recompute).
Rerun rerun(const Strategy& strategy, Recompute recompute);

}  // namespace paradyse
