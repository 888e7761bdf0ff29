// Which (query, key) pairs an attention call computes: token positions of its queries and keys, the
// documents of a packed sequence (attention never crosses one), causality and attention dropout. It
// is an argument of the backend's attention calls, so the tracer can count the pairs a call computes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace paradyse {

struct TokenRange {
  int64_t begin = 0;  // global position of the first token
  int64_t length = 0;
};
using Positions = std::vector<TokenRange>;  // positions of a tensor's sequence dim, in order

// End positions of a packed sequence's documents, ascending (FlashAttention's cu_seqlens without the
// leading 0); the last is the sequence's length.
using DocumentEnds = std::vector<int64_t>;

// Which (query, key) pairs attention computes: those within one document (all of them when there is one),
// and of those all, or key position ≤ query position.
struct AttentionMask {
  bool causal = false;
  Positions queries;                                  // positions of the query tensor's sequence dim
  Positions keys;                                     // positions of the key tensor's sequence dim
  std::shared_ptr<const DocumentEnds> document_ends;  // null: one document
  // Probability that a computed pair's probability is dropped. A FlashAttention kernel draws these
  // inside (and again in backward, from the same seed), so only its time depends on it; the real
  // backend's reference kernels compute without it, as strategies are checked against each other.
  double dropout = 0;
  // Number of (query, key) pairs that are computed, per batch element and head. Counted once and kept
  // with longest_document_keys: a ring step asks whether its block is empty and then the backend asks for
  // the count, and with thousands of packed documents counting is the dearest part of tracing a step. A
  // mask's fields are not changed once it is used.
  double computed_pairs() const { return counts().pairs; }
  int64_t query_count() const;
  int64_t key_count() const;
  // The most keys of one document: what a variable-length kernel's longest tile row spans.
  int64_t longest_document_keys() const { return counts().longest_document_keys; }
  // True when no pair is computed (a ring step that the causal mask or the documents skip entirely).
  bool empty() const { return computed_pairs() == 0; }

  struct Counts {
    double pairs = 0;
    int64_t longest_document_keys = 0;
  };
  const Counts& counts() const;
  mutable std::optional<Counts> counted_ = std::nullopt;  // counts() once counted. Never set otherwise.
};

// Where each token of a q or k tensor's sequence dim sits for the rotary position embedding: its
// global position (`tokens`, as Positions lays them out) counted from the start of its document, so a
// packed document is rotated as it would be alone. `theta` is the model's rope_theta.
struct RotaryPositions {
  Positions tokens;
  std::shared_ptr<const DocumentEnds> document_ends;  // null: one document
  double theta = 10000;
};

}  // namespace paradyse
