// What one micro-batch trains: one sequence, or several documents packed end to end into one sequence
// in which attention stays within each document (sequence_layout.hpp). Lengths are as the data gives
// them; the layout pads each document on its own.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

namespace paradyse {

struct MicroBatch {
  std::vector<int64_t> documents;  // tokens of each, in packing order

  static MicroBatch sequence(int64_t tokens) { return {{tokens}}; }
  int64_t tokens() const;  // Σ documents
  bool packed() const { return documents.size() > 1; }
  // Each document padded to the layout's multiple (SequenceLayout::padded_lengths), and their sum.
  std::vector<int64_t> padded_documents(int degree, bool zigzag) const;
  int64_t padded_tokens(int degree, bool zigzag) const;
  // What a step's cost depends on: the padded documents, longest first (their order changes nothing).
  std::vector<int64_t> cost_key(int degree, bool zigzag) const;
  // "4096", or "3 documents, 4096 tokens".
  std::string describe() const;

  auto operator<=>(const MicroBatch&) const = default;
};

}  // namespace paradyse
