// Which tokens of a sequence each rank holds, and the attention masks that follow from it.
//
// The unified layout (ParaDySe, AAAI-26 Table 2) keeps activations [b, s/p, h] between layers for
// every strategy. For causal models the s/p tokens of rank r are the two zig-zag chunks r and 2p−1−r
// of size s/(2p), which balances ring attention's work (REFERENCE.md §2); for non-causal models they
// are the contiguous chunk r. Every strategy uses the same assignment, so switching strategy between
// layers never moves data; a strategy that gathers the whole sequence sees it in rank order and
// passes the token positions to attention, which masks by position, not by index.
#pragma once

#include <cstdint>
#include <vector>

namespace paradyse {

struct TokenRange {
  int64_t begin = 0;  // global position of the first token
  int64_t length = 0;
};
using Positions = std::vector<TokenRange>;  // positions of a tensor's sequence dim, in order

class SequenceLayout {
 public:
  // Throws InputError when `tokens` is not divisible as required (see required_multiple).
  SequenceLayout(int64_t tokens, int degree, bool zigzag);

  // Tokens must be a multiple of this: 2p with zig-zag chunks, p otherwise.
  static int64_t required_multiple(int degree, bool zigzag) { return zigzag ? 2 * degree : degree; }
  // The padding rule: round up to the next multiple. Padded tokens are computed and masked out of
  // the loss; reported wherever a length is padded.
  static int64_t padded_length(int64_t tokens, int degree, bool zigzag);

  int64_t tokens() const { return tokens_; }
  int degree() const { return degree_; }
  bool zigzag() const { return zigzag_; }
  int64_t local_tokens() const { return tokens_ / degree_; }
  Positions local(int rank) const;  // rank's own tokens, in its local order
  Positions gathered() const;       // all tokens, as an all-gather in rank order lays them out

 private:
  int64_t tokens_;
  int degree_;
  bool zigzag_;
};

// Which (query, key) pairs attention computes: all of them, or key position ≤ query position.
struct AttentionMask {
  bool causal = false;
  Positions queries;  // positions of the query tensor's sequence dim
  Positions keys;     // positions of the key tensor's sequence dim
  // Number of (query, key) pairs that are computed, per batch element and head.
  double computed_pairs() const;
  int64_t query_count() const;
  int64_t key_count() const;
  // True when no pair is computed (a ring step that a causal mask skips entirely).
  bool empty() const { return causal && computed_pairs() == 0; }
};

}  // namespace paradyse
