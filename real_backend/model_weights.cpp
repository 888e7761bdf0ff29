#include "real_backend/model_weights.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "strategies/grouped_step.hpp"
#include "strategies/strategy.hpp"

namespace paradyse::real {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t hash_name(std::string_view name, uint64_t seed) {
  uint64_t h = splitmix64(seed);
  for (char c : name) h = splitmix64(h ^ static_cast<unsigned char>(c));
  return h;
}

// Uniform in [−1, 1), a pure function of its arguments.
float uniform(uint64_t name_hash, int64_t index) {
  const uint64_t bits = splitmix64(name_hash ^ splitmix64(static_cast<uint64_t>(index)));
  return static_cast<float>(static_cast<double>(bits >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

// Value of element (row, col) of the whole tensor. Scales keep activations of unit size through the
// layers, so that gradients are far from float32's rounding in the tests that compare them.
float element(std::string_view name, uint64_t name_hash, int64_t row, int64_t col, int64_t cols) {
  const float u = uniform(name_hash, row * cols + col);
  if (name.ends_with("gamma")) return 1.0f + 0.2f * u;
  if (name.ends_with("beta")) return 0.2f * u;
  if (name == "embedding") return u;
  return u * static_cast<float>(std::sqrt(3.0 / static_cast<double>(cols)));  // unit variance out
}

// Where rank `shard`'s rows live in the whole tensor (LayerWeights::shard_blocks).
std::vector<LayerWeights::RowBlock> shard_rows(std::string_view name, const ModelSpec& model,
                                               int64_t shard_rows_count, int shard, int degree) {
  std::vector<int64_t> groups{shard_rows_count};
  if (name.ends_with(".qkv")) groups = LayerWeights::qkv_groups(model, degree);
  if (name.ends_with(".mlp_in")) groups = LayerWeights::mlp_in_groups(model, degree);
  std::vector<LayerWeights::RowBlock> blocks = LayerWeights::shard_blocks(groups, degree, shard);
  PARADYSE_CHECK(blocks.back().shard_start + blocks.back().rows == shard_rows_count,
                 "row groups of " + std::string(name) + " do not fill its shard");
  return blocks;
}

bool is_flat(std::string_view name) {
  return name.ends_with(".flat");
}

}  // namespace

at::Tensor ModelWeights::full(std::string_view name, const Shape& shape) const {
  PARADYSE_CHECK(shape.size() == 1 || shape.size() == 2, "weights are vectors or matrices");
  const int64_t rows = shape.size() == 2 ? shape[0] : 1, cols = shape.back();
  const uint64_t h = hash_name(name, seed_);
  at::Tensor t = at::empty({rows, cols}, at::kFloat);
  float* data = t.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) data[r * cols + c] = element(name, h, r, c, cols);
  return t.view(shape);
}

at::Tensor ModelWeights::shard(std::string_view name, const Shape& shard_shape, int shard, int degree) const {
  if (is_flat(name)) {  // a layer flattened (layer_flat_layout) and sharded over the job
    const std::string layer(name.substr(0, name.size() - 4));  // "layers.N."
    const LayerFlatLayout layout = layer_flat_layout(model_);
    at::Tensor flat = at::zeros({layout.padded(degree)}, at::kFloat);
    for (const FlatPart& part : layout.parts) {
      const at::Tensor whole = full(layer + part.name, part.shape).reshape({-1});
      flat.narrow(0, part.offset, whole.numel()).copy_(whole);
    }
    return flat.narrow(0, shard * shard_shape[0], shard_shape[0]).clone();
  }
  if (shard_shape.size() == 1) return full(name, shard_shape);
  const int64_t rows = shard_shape[0], cols = shard_shape[1];
  const at::Tensor whole = full(name, {rows * degree, cols});
  std::vector<at::Tensor> parts;
  for (const LayerWeights::RowBlock& block : shard_rows(name, model_, rows, shard, degree))
    parts.push_back(whole.narrow(0, block.whole_start, block.rows));
  return at::cat(parts, 0);
}

at::Tensor join_shards(std::string_view name, const std::vector<at::Tensor>& shards, const ModelSpec& model) {
  PARADYSE_CHECK(!shards.empty(), "join_shards of nothing");
  if (is_flat(name)) return at::cat(shards, 0);
  if (shards[0].dim() == 1) return shards[0];
  const int degree = static_cast<int>(shards.size());
  const int64_t rows = shards[0].size(0);
  at::Tensor whole = at::empty({rows * degree, shards[0].size(1)}, shards[0].options());
  for (int r = 0; r < degree; ++r)
    for (const LayerWeights::RowBlock& block : shard_rows(name, model, rows, r, degree))
      whole.narrow(0, block.whole_start, block.rows)
          .copy_(shards[static_cast<std::size_t>(r)].narrow(0, block.shard_start, block.rows));
  return whole;
}

}  // namespace paradyse::real
