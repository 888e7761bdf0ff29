// One pre-norm Transformer layer around a strategy's attention and MLP, written once for all of them:
//   h1 = x + dropout(attention(norm1(x))),   y = h1 + dropout(mlp(norm2(h1)))
// Norms, dropout and residuals act on the local [b, s/p, h] shard, so they are the same for every
// strategy; recomputation of the whole layer lives here too.
#pragma once

#include <memory>

#include "strategies/strategy.hpp"

namespace paradyse {

// What the layer keeps between its forward and backward. With full recomputation only `x`.
struct LayerSaved {
  Tensor x;          // layer input: norm1's input, the first residual
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

}  // namespace paradyse
