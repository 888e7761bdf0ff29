// Which tokens of a sequence each rank holds, and the attention masks that follow from it.
//
// The unified layout (ParaDySe, AAAI-26 Table 2) keeps activations [b, s/p, h] between layers for
// every strategy. For causal models the s/p tokens of rank r are the two zig-zag chunks r and 2p−1−r
// of size s/(2p), which balances ring attention's work: under the causal mask chunk i attends to the
// i chunks before it and to half of itself, so chunks r and 2p−1−r together do 2p chunks' worth on
// every rank (the zig-zag order of ring-flash-attention's zigzag_ring_flash_attn.py and of Megatron-LM's
// context parallelism); for non-causal models they are the contiguous chunk r. Every strategy uses the
// same assignment, so switching strategy between layers never moves data; a strategy that gathers the
// whole sequence sees it in rank order and passes the token positions to attention, which masks by
// position, not by index.
//
// A packed micro-batch lays several documents end to end in one sequence; attention never crosses a
// document boundary. Each document is split across the ranks as a whole sequence is (its own 2p
// zig-zag chunks, or p contiguous ones) and padded to that multiple on its own, as Megatron-LM with
// TransformerEngine splits a packed (THD) batch for context parallelism
// (get_batch_on_this_cp_rank, tex.thd_get_partitioned_indices): every rank then holds the same share of
// every document, so causal work is balanced exactly, document by document, whatever the lengths. A
// rank's tokens are its chunks of the first document, then of the second, and so on. The cost is up to
// 2p − 1 padding tokens per document.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "program/attention_mask.hpp"

namespace paradyse {

class SequenceLayout {
 public:
  // One document of `tokens`. Throws InputError when `tokens` is not divisible as required (see
  // required_multiple).
  SequenceLayout(int64_t tokens, int degree, bool zigzag);
  // Documents of these lengths packed end to end, each divisible as required.
  SequenceLayout(const std::vector<int64_t>& document_tokens, int degree, bool zigzag);

  // A document's tokens must be a multiple of this: 2p with zig-zag chunks, p otherwise.
  static int64_t required_multiple(int degree, bool zigzag) { return zigzag ? 2 * degree : degree; }
  // The padding rule: round up to the next multiple. Padded tokens are computed and masked out of
  // the loss; reported wherever a length is padded.
  static int64_t padded_length(int64_t tokens, int degree, bool zigzag);
  // Every document padded on its own.
  static std::vector<int64_t> padded_lengths(const std::vector<int64_t>& document_tokens, int degree,
                                             bool zigzag);

  // The layout as seen by groups of `ranks_per_member` consecutive ranks: member j holds the tokens of
  // ranks j·m, …, j·m + m − 1, in that order (what an all-to-all over each group gathers). A 2-D
  // strategy's ring runs over such members. It must divide the degree.
  SequenceLayout merged(int ranks_per_member) const;

  int64_t tokens() const { return tokens_; }
  int degree() const { return degree_ / ranks_per_member_; }
  bool zigzag() const { return zigzag_; }
  int64_t local_tokens() const { return tokens_ / degree(); }
  // The documents' ends; null for a single document (nothing to mask between documents).
  const std::shared_ptr<const DocumentEnds>& document_ends() const { return document_ends_; }
  Positions local(int rank) const;  // rank's (or member's) own tokens, in its local order
  Positions gathered() const;       // all tokens, as an all-gather in rank order lays them out

 private:
  std::size_t ranges_per_rank() const;
  void append_rank_tokens(int rank, Positions& ranges) const;  // one rank's, appended

  int64_t tokens_ = 0;
  int degree_;  // ranks the sequence is split over
  int ranks_per_member_ = 1;
  bool zigzag_;
  std::vector<int64_t> document_tokens_;
  std::shared_ptr<const DocumentEnds> document_ends_;
};

}  // namespace paradyse
