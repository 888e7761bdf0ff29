#include "strategies/layer_flat_layout.hpp"

#include <utility>

namespace paradyse {

LayerFlatLayout layer_flat_layout(const ModelSpec& model) {
  const int64_t h = model.hidden;
  LayerFlatLayout layout;
  const auto add = [&](const char* name, Shape shape, Tensor LayerWeights::*member) {
    int64_t numel = 1;
    for (const int64_t n : shape) numel *= n;
    layout.parts.push_back({name, std::move(shape), layout.elements, member});
    layout.elements += numel;
  };
  add("qkv", {h + 2 * model.kv_hidden(), h}, &LayerWeights::qkv);
  add("proj", {h, h}, &LayerWeights::proj);
  add("mlp_in", {model.mlp_in_rows(), h}, &LayerWeights::mlp_in);
  add("mlp_out", {model.ffn_hidden, h}, &LayerWeights::mlp_out);
  const bool betas = model.norm == NormKind::layer_norm;
  add("norm1.gamma", {h}, &LayerWeights::norm1_gamma);
  if (betas) add("norm1.beta", {h}, &LayerWeights::norm1_beta);
  add("norm2.gamma", {h}, &LayerWeights::norm2_gamma);
  if (betas) add("norm2.beta", {h}, &LayerWeights::norm2_beta);
  return layout;
}

}  // namespace paradyse
