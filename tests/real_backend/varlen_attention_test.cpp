// Attention as variable-length tiles: the tiles each kind of mask the strategies make is cut into,
// and the tiled attention (with the exact attention as each tile's kernel) against the exact attention
// over the whole mask, forward and backward; on a GPU, FlashAttention-2's tiles against the same.
#include <memory>

#include "real_backend/host_allocator.hpp"
#include "real_backend/varlen_attention.hpp"
#include "tests/real_backend/rank_group.hpp"
#include "tests/real_backend/real_helpers.hpp"

#include "tests/real_backend/catch_after_torch.hpp"  // last: after LibTorch

namespace paradyse::testing {
namespace {

using Rows = std::vector<std::pair<int64_t, int64_t>>;  // (first row, rows)

Positions rows(const Rows& ranges) {
  Positions p;
  for (const auto& [begin, length] : ranges) p.push_back({begin, length});
  return p;
}

Rows pairs(const Positions& p) {
  Rows r;
  for (const TokenRange& t : p) r.emplace_back(t.begin, t.length);
  return r;
}

void check_tile(const real::VarlenTile& tile, const Positions& q_rows, const Positions& k_rows, bool causal) {
  CHECK(pairs(tile.q_rows) == pairs(q_rows));
  CHECK(pairs(tile.k_rows) == pairs(k_rows));
  CHECK(tile.causal == causal);
}

}  // namespace

TEST_CASE("varlen tiles: a sequence in zig-zag chunks is one causal tile in position order", "[real]") {
  // One rank's two chunks [0, 4) and [4, 8) end to end: one run.
  const Positions whole = rows({{0, 4}, {4, 4}});
  auto tiles = real::varlen_tiles({true, whole, whole, nullptr});
  REQUIRE(tiles);
  REQUIRE(tiles->size() == 1);
  check_tile(tiles->front(), rows({{0, 8}}), rows({{0, 8}}), true);
  // Ulysses' gathered sequence of 2 ranks: chunks 0, 3, 1, 2 of 2 tokens at rows 0, 2, 4, 6.
  const Positions gathered = rows({{0, 2}, {6, 2}, {2, 2}, {4, 2}});
  tiles = real::varlen_tiles({true, gathered, gathered, nullptr});
  REQUIRE(tiles);
  REQUIRE(tiles->size() == 1);
  check_tile(tiles->front(), rows({{0, 2}, {4, 4}, {2, 2}}), rows({{0, 2}, {4, 4}, {2, 2}}), true);
}

TEST_CASE("varlen tiles: a ring's blocks are whole, diagonal or skipped, and documents cut them", "[real]") {
  // Rank 0 of 2 holds chunks 0 and 3 ([0, 2), [6, 8)); rank 1's keys are chunks 1 and 2 ([2, 6)).
  const Positions mine = rows({{0, 2}, {6, 2}}), theirs = rows({{2, 2}, {4, 2}});
  auto tiles = real::varlen_tiles({true, mine, theirs, nullptr});
  REQUIRE(tiles);
  REQUIRE(tiles->size() == 1);  // chunk 0 sees none of them, chunk 3 all
  check_tile(tiles->front(), rows({{2, 2}}), rows({{0, 4}}), false);
  tiles = real::varlen_tiles({true, mine, mine, nullptr});  // its own chunks: two diagonals, 3 sees 0
  REQUIRE(tiles);
  REQUIRE(tiles->size() == 3);
  check_tile((*tiles)[0], rows({{0, 2}}), rows({{0, 2}}), true);
  check_tile((*tiles)[1], rows({{2, 2}}), rows({{0, 2}}), false);
  check_tile((*tiles)[2], rows({{2, 2}}), rows({{2, 2}}), true);
  // Documents ending at 5 and 8: chunk 3 sees only its own document's keys, [5, 6).
  const auto ends = std::make_shared<const DocumentEnds>(DocumentEnds{5, 8});
  tiles = real::varlen_tiles({true, mine, theirs, ends});
  REQUIRE(tiles);
  REQUIRE(tiles->size() == 1);
  check_tile(tiles->front(), rows({{2, 2}}), rows({{3, 1}}), false);
  // Bidirectional: every block whole, within documents.
  tiles = real::varlen_tiles({false, mine, theirs, ends});
  REQUIRE(tiles);
  REQUIRE(tiles->size() == 2);
  check_tile((*tiles)[0], rows({{0, 2}}), rows({{0, 3}}), false);
  check_tile((*tiles)[1], rows({{2, 2}}), rows({{3, 1}}), false);
}

TEST_CASE("varlen tiles: keys both before and after a query off the diagonal are no tile", "[real]") {
  CHECK_FALSE(real::varlen_tiles({true, rows({{0, 4}}), rows({{2, 4}}), nullptr}));
  CHECK(real::varlen_tiles({false, rows({{0, 4}}), rows({{2, 4}}), nullptr}));  // bidirectional: whole
}

namespace {

// Tiled attention with the given kernels against the exact attention over the whole mask.
void check_tiled(const AttentionMask& mask, at::ScalarType type, const at::Device& device, double tolerance,
                 bool flash) {
  const int64_t b = 2, heads = 4, kv = 2, d = 16;
  const auto make = [&](int64_t s, int64_t h) {
    return at::randn({b, s, h, d}, at::TensorOptions(at::kFloat).device(device)).to(type);
  };
  const at::Tensor q = make(mask.query_count(), heads), k = make(mask.key_count(), kv),
                   v = make(mask.key_count(), kv), d_out = make(mask.query_count(), heads);
  // The exact attention, as the real backend runs it with varlen off, on fp32 copies.
  real::TorchBackendOptions exact_options;
  exact_options.device = device;
  exact_options.varlen_attention = false;
  real::TorchBackendOptions tiled_options = exact_options;
  tiled_options.varlen_attention = true;
  tiled_options.precision = flash ? real::Precision::mixed : real::Precision::fp32;
  const ModelSpec model = tiny_model(true, mask.causal);
  struct Result {
    at::Tensor out, lse, d_q, d_k, d_v;
  };
  const auto run = [&](const real::TorchBackendOptions& options) {
    return run_ranks<Result>(
        1, model,
        [&](real::TorchBackend& be) {
          const Tensor tq = be.wrap(q, DType::bf16), tk = be.wrap(k, DType::bf16),
                       tv = be.wrap(v, DType::bf16);
          const AttentionOutput f = be.attention_forward(tq, tk, tv, mask);
          const AttentionGrads g =
              be.attention_backward(be.wrap(d_out, DType::bf16), tq, tk, tv, f.out, f.lse, mask);
          return Result{torch_of(f.out), torch_of(f.lse), torch_of(g.d_q), torch_of(g.d_k), torch_of(g.d_v)};
        },
        options)[0];
  };
  const Result exact = run(exact_options), tiled = run(tiled_options);
  CHECK(relative_error(tiled.out, exact.out) <= tolerance);
  const at::Tensor finite = at::isfinite(exact.lse);
  CHECK(at::equal(at::isfinite(tiled.lse), finite));
  CHECK(relative_error(tiled.lse.masked_select(finite), exact.lse.masked_select(finite)) <= tolerance);
  CHECK(relative_error(tiled.d_q, exact.d_q) <= tolerance);
  CHECK(relative_error(tiled.d_k, exact.d_k) <= tolerance);
  CHECK(relative_error(tiled.d_v, exact.d_v) <= tolerance);
}

std::vector<AttentionMask> ring_masks(bool causal) {
  const Positions mine = rows({{0, 16}, {48, 16}}), theirs = rows({{16, 16}, {32, 16}});
  const auto ends = std::make_shared<const DocumentEnds>(DocumentEnds{20, 40, 64});
  return {{causal, mine, mine, nullptr},
          {causal, mine, theirs, nullptr},
          {causal, theirs, mine, nullptr},
          {causal, mine, mine, ends},
          {causal, theirs, mine, ends},
          {causal, rows({{0, 64}}), rows({{0, 64}}), ends},
          {causal, rows({{0, 16}, {48, 16}, {16, 16}, {32, 16}}),
           rows({{0, 16}, {48, 16}, {16, 16}, {32, 16}}), nullptr}};
}

}  // namespace

TEST_CASE("tiled attention with exact tiles computes what the exact attention computes", "[real][numerics]") {
  const bool causal = GENERATE(true, false);
  at::manual_seed(5);
  for (const AttentionMask& mask : ring_masks(causal))
    check_tiled(mask, at::kFloat, test_device(), 1e-5, false);
}

TEST_CASE("on a GPU, FlashAttention's tiles compute what the exact attention computes, in bf16",
          "[real][numerics][gpu]") {
  // bf16 keeps 8 significant bits: each rounding is within 2^-9 of the value, and FlashAttention rounds
  // its probabilities (and, in backward, dS) to bf16 before a GEMM; 2 % of the largest value allows a
  // few such roundings and no wrong tile.
  if (!test_device().is_cuda() || !real::flash_kernels()) return;
  const bool causal = GENERATE(true, false);
  at::manual_seed(5);
  for (const AttentionMask& mask : ring_masks(causal))
    check_tiled(mask, at::kBFloat16, test_device(), 2e-2, true);
}

TEST_CASE("the exact attention holds a tile's mask at a time, never a whole [s_q, s_k] one", "[real]") {
  // One head of 8 dims over 8K causal tokens in blocks of 4 MiB of scores: the whole mask would be
  // 64 MiB, the tiles' working set (a block and the few of its size made from it in backward) is far
  // under half of it.
  constexpr int64_t s = 8 * 1024;
  const AttentionMask mask{true, rows({{0, s}}), rows({{0, s}}), nullptr};
  real::TorchBackendOptions options;
  options.device = at::Device(at::kCPU);
  options.varlen_attention = false;
  options.attention_block_bytes = int64_t{4} << 20;
  const int64_t peak = run_ranks<int64_t>(
      1, tiny_model(true, true),
      [&](real::TorchBackend& be) {
        const auto make = [&] { return be.wrap(at::randn({1, s, 1, 8}), DType::bf16); };
        const Tensor q = make(), k = make(), v = make();
        const int64_t before = real::HostAllocator::in_use_bytes();
        real::HostAllocator::reset_peak();
        const AttentionOutput f = be.attention_forward(q, k, v, mask);
        (void)be.attention_backward(make(), q, k, v, f.out, f.lse, mask);
        return real::HostAllocator::peak_bytes() - before;
      },
      options)[0];
  CHECK(peak < s * s / 2);
}

}  // namespace paradyse::testing
