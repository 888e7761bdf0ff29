// ZeRO-3 weights and the sequence-local sublayer pieces that MegatronCZ, UlyssesZ and ColossalZ share.
// A weight is gathered whole just before use and freed after; its gradient, computed from this rank's
// tokens, is reduce-scattered back onto the owner's shard: 3(N−1)/N·Φ per layer, the 1.5× of data
// parallelism's all-reduce that Rajbhandari et al. give for ZeRO stage 3 ("ZeRO: Memory Optimizations
// Toward Training Trillion Parameter Models", SC20).
#pragma once

#include <vector>

#include "strategies/strategy.hpp"

namespace paradyse::zero3 {

// A matrix of a layer's weights: &LayerWeights::qkv, ::proj, ::mlp_in or ::mlp_out.
using Matrix = Tensor LayerWeights::*;

// The whole matrix `m` from every rank's shard of it, in rank order; at once, with no communication,
// when the layer's weights are whole already (LayerWeights::whole, a grouped step's).
Pending gather_async(Backend& be, const LayerWeights& w, Matrix m);
// Rows regrouped so that each group (e.g. all query heads, then all key heads, then all value heads)
// is contiguous: [p·rows, h]. Whole weights are in that order already.
Tensor regroup(Backend& be, const LayerWeights& w, const Tensor& gathered,
               const std::vector<int64_t>& groups);
Tensor gather(Backend& be, const LayerWeights& w, Matrix m, const std::vector<int64_t>& groups);
// Sums the whole-matrix gradient over ranks onto this rank's shard of `m`: adds it into grads.*m; into
// the whole gradient, with no communication, when `grads` are whole.
void scatter_grad(Backend& be, const Tensor& full_grad, const std::vector<int64_t>& groups,
                  LayerWeights& grads, Matrix m);

// q [b, s, a, d], k and v [b, s, a_kv, d] for this rank's tokens, from its normalised input x [b, s, h];
// q and k rotated at those tokens' positions where the model has rotary embeddings.
struct Projected {
  Tensor q, k, v;
};
Projected project_qkv(Backend& be, const LayerContext& ctx, const LayerWeights& w, const Tensor& x);
// Backward of project_qkv: returns d_x, adds the W_qkv gradient into grads.qkv.
Tensor project_qkv_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w, const Tensor& x,
                            const Tensor& d_q, const Tensor& d_k, const Tensor& d_v, LayerWeights& grads);
// o [b, s, a, d] → [b, s, h] through the whole W_proj; `w_proj` may be passed in when prefetched.
Tensor project_out(Backend& be, const ModelSpec& model, const Tensor& w_proj, const Tensor& o);
// Backward of project_out: returns d_o [b, s, a, d], adds the W_proj gradient into grads.proj.
Tensor project_out_backward(Backend& be, const ModelSpec& model, const LayerWeights& w, const Tensor& o,
                            const Tensor& d_y, LayerWeights& grads);

// The MLP on this rank's tokens with whole (gathered) weights; saved state for mlp_backward.
SublayerOutput mlp_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w, const Tensor& x);
Tensor mlp_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w, SavedActivations& saved,
                    const Tensor& d_y, LayerWeights& grads);

// A strategy whose MLP is the sequence-local ZeRO-3 one above (MegatronCZ, UlyssesZ, ColossalZ).
class Zero3MlpStrategy : public Strategy {
 public:
  bool uses_whole_weights() const final { return true; }
  SublayerOutput mlp_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                             const Tensor& x) const final {
    return zero3::mlp_forward(be, ctx, w, x);
  }
  Tensor mlp_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w, SavedActivations& saved,
                      const Tensor& d_y, LayerWeights& grads) const final {
    return zero3::mlp_backward(be, ctx, w, saved, d_y, grads);
  }
};

}  // namespace paradyse::zero3

namespace paradyse {
// The MLP activation (GELU or SwiGLU) of a model, forward and backward.
Tensor activation(Backend& be, const ModelSpec& model, const Tensor& x);
Tensor activation_backward(Backend& be, const ModelSpec& model, const Tensor& d_y, const Tensor& x);
}  // namespace paradyse
