// Attention as a variable-length kernel runs it (FlashAttention's varlen API): the pairs an
// AttentionMask allows, cut into tiles of a contiguous run of queries against a contiguous run of
// keys, each tile wholly visible or causal on its diagonal. Every mask the strategies make is such
// tiles: the whole sequence, its documents (packed micro-batches), and a ring's blocks, whose zig-zag
// chunks are each before, after or the same as another's. The tiles of one round (at most one per
// run of queries) and one kind (causal or not) are one kernel call on packed rows; a run of queries
// in several tiles (a chunk seeing earlier chunks and its own) gets one partial result per round,
// merged by their log-sum-exp as ring attention merges its blocks.
//
// Backward calls each round's kernel with the merged output and log-sum-exp, as ring
// FlashAttention does: a tile's probabilities are exp(s − lse) under the final lse, and the softmax
// correction is rowsum(dO ∘ O) of the final output.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <optional>
#include <vector>

#include "strategies/sequence_layout.hpp"

namespace paradyse::real {

// Queries at rows `q_rows` of the query tensor's sequence dim against keys at rows `k_rows` of the
// key tensor's (rows in the order of their positions, each side one contiguous run of positions of
// one document): all pairs, or with `causal` key ≤ query (then both sides hold the same positions).
struct VarlenTile {
  Positions q_rows, k_rows;  // TokenRange{first row, rows}
  bool causal = false;
};

// The mask's tiles, ordered by run of queries; nullopt when some pair of runs is none of the three
// (keys both before and after a query, other than on the diagonal).
std::optional<std::vector<VarlenTile>> varlen_tiles(const AttentionMask& mask);

// One kernel call: packed rows of q [total_q, heads, d], k and v [total_k, kv_heads, d], sequence i
// of q_lengths[i] queries against k_lengths[i] keys.
struct VarlenCall {
  at::Tensor q, k, v;
  std::vector<int64_t> q_lengths, k_lengths;
  bool causal = false;
  double scale = 1;
};
struct VarlenForward {
  at::Tensor out;  // [total_q, heads, d], q's type
  at::Tensor lse;  // [heads, total_q], float32
};
struct VarlenGrads {
  at::Tensor d_q, d_k, d_v;  // packed as q, k, v
};
struct VarlenKernels {
  std::function<VarlenForward(const VarlenCall&)> forward;
  // With the output and log-sum-exp of the whole attention, packed as the call's q rows.
  std::function<VarlenGrads(const VarlenCall&, const at::Tensor& d_out, const VarlenForward& merged)>
      backward;
};

// Two partial attentions of the same queries over disjoint keys, merged by their log-sum-exps (float32,
// any layout, the same for both): the merged lse = log(e^a + e^b), and each part's weight
// exp(lse_part − merged) in that layout. Rows neither part reached keep −inf and weight 0, not NaN.
struct LseMerge {
  at::Tensor lse, weight_a, weight_b;
};
LseMerge merge_lse(const at::Tensor& lse_a, const at::Tensor& lse_b);

// ATen's FlashAttention-2 (CUDA, bf16 or fp16, head dims a multiple of 8 up to 256) where this
// LibTorch has it; nullopt elsewhere.
std::optional<VarlenKernels> flash_kernels();

// q [b, s_q, heads, d], k and v [b, s_k, kv_heads, d] → out [b, s_q, heads, d] (q's type) and
// lse [b, heads, s_q] (float32; rows no tile reaches: output 0, lse −inf).
VarlenForward tiled_attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const std::vector<VarlenTile>& tiles, double scale,
                                      const VarlenKernels& kernels);
// Gradients of q, k and v (in their type) from d_out and the forward's out and lse.
VarlenGrads tiled_attention_backward(const at::Tensor& d_out, const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                     const std::vector<VarlenTile>& tiles, double scale,
                                     const VarlenKernels& kernels);

}  // namespace paradyse::real
