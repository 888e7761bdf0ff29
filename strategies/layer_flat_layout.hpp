// A layer's weights as one flat tensor: how a step that shards every layer whole over a shard group
// (FSDP's flat parameter per layer; grouped_step.hpp) lays them out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strategies/strategy.hpp"

namespace paradyse {

// Where each of a layer's weights lies in its flat tensor, in order: qkv, proj, mlp_in, mlp_out,
// norm1.gamma, norm1.beta, norm2.gamma, norm2.beta (betas only under LayerNorm), each whole, row-major.
struct FlatPart {
  std::string name;  // the weight's name within the layer (ModelWeights names)
  Shape shape;
  int64_t offset = 0;
  Tensor LayerWeights::*member = nullptr;
};
struct LayerFlatLayout {
  std::vector<FlatPart> parts;
  int64_t elements = 0;
  // Elements after padding to a multiple of the shard group's ranks, as FSDP pads its flat parameter.
  int64_t padded(int shard_degree) const {
    return (elements + shard_degree - 1) / shard_degree * shard_degree;
  }
};
LayerFlatLayout layer_flat_layout(const ModelSpec& model);

}  // namespace paradyse
