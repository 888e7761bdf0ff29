// DeepSpeed-Ulysses' all-to-all between sequence shards and head shards (Jacobs et al. 2023), over the
// parallel group: what UlyssesZ runs over its whole group and USP over each of its Ulysses groups.
#pragma once

#include "program/backend.hpp"

namespace paradyse::ulysses {

// Sequence dim and head dim of the [b, s, heads, d] tensors attention takes.
constexpr int kSequenceDim = 1;
constexpr int kHeadDim = 2;

// [b, n, heads, d] → [b, p·n, heads/p, d]: part j of the heads goes to rank j, which concatenates every
// rank's tokens in rank order.
inline Pending sequence_to_heads_async(Communication& be, const Tensor& x) {
  return be.all_to_all_async(x, kHeadDim, kSequenceDim);
}

// [b, p·n, heads/p, d] → [b, n, heads, d]: rank j's tokens go back to it, which concatenates every rank's
// heads in rank order.
inline Pending heads_to_sequence_async(Communication& be, const Tensor& x) {
  return be.all_to_all_async(x, kSequenceDim, kHeadDim);
}

}  // namespace paradyse::ulysses
