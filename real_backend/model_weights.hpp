// The initial weights of a model, defined once for the whole logical tensors and independent of the
// degree: element (row, column) of a weight is a hash of (seed, name, row, column). A rank's shard is
// cut from that definition the way LayerWeights lays shards out (training_step.hpp names the
// weights), so p ranks start from exactly the weights a one-device reference gets from full().
//
// Whole logical tensors, by name ("layers.N." prefixes the per-layer ones):
//   qkv [h + 2h_kv, h] = [W_q; W_k; W_v]; proj [h, h]; mlp_in [f_in, h] ([gate; up] for SwiGLU);
//   mlp_out [f, h]; norm1.gamma, norm1.beta, norm2.gamma, norm2.beta, final_norm.gamma,
//   final_norm.beta [h] (replicated on every rank); embedding and head [V_padded, h].
// "layers.N.flat" is layer N's weights flattened as layer_flat_layout lays them out and padded, its
// shard `shard` a contiguous 1/degree of it (a grouped step's weights, sharded over the job).
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "program/tensor.hpp"
#include "strategies/model.hpp"

namespace paradyse::real {

class ModelWeights {
 public:
  ModelWeights(const ModelSpec& model, uint64_t seed) : model_(model), seed_(seed) {}

  // The whole logical tensor `name` of `shape`, fp32 on the CPU.
  at::Tensor full(std::string_view name, const Shape& shape) const;
  // Rank `shard`'s rows of it, of `shard_shape`, for a group of `degree` ranks; replicated (1-D)
  // weights are the whole tensor on every rank.
  at::Tensor shard(std::string_view name, const Shape& shard_shape, int shard, int degree) const;

 private:
  const ModelSpec& model_;
  uint64_t seed_;
};

// The whole logical tensor from every rank's shard of it, in rank order: the inverse of shard(), used
// to compare or save what the ranks hold.
at::Tensor join_shards(std::string_view name, const std::vector<at::Tensor>& shards, const ModelSpec& model);

}  // namespace paradyse::real
