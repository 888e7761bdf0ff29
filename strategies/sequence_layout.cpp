#include "strategies/sequence_layout.hpp"

#include <algorithm>
#include <string>

#include "common/errors.hpp"

namespace paradyse {

namespace {

void check_divisible(int64_t tokens, int degree, bool zigzag, const std::string& field,
                     const std::string& what) {
  const int64_t multiple = SequenceLayout::required_multiple(degree, zigzag);
  if (tokens <= 0 || tokens % multiple != 0)
    throw InputError(
        "", 0, field,
        "expected " + what + " that is a positive multiple of " + std::to_string(multiple) +
            (zigzag ? " (2 × degree: causal models split each rank's tokens into two zig-zag chunks)"
                    : " (the degree)") +
            ", got " + std::to_string(tokens));
}

}  // namespace

SequenceLayout::SequenceLayout(int64_t tokens, int degree, bool zigzag)
    : tokens_(tokens), degree_(degree), zigzag_(zigzag), document_tokens_{tokens} {
  PARADYSE_CHECK(degree >= 1, "degree must be positive");
  check_divisible(tokens, degree, zigzag, "seq", "a sequence length");
}

SequenceLayout::SequenceLayout(const std::vector<int64_t>& document_tokens, int degree, bool zigzag)
    : degree_(degree), zigzag_(zigzag), document_tokens_(document_tokens) {
  PARADYSE_CHECK(degree >= 1, "degree must be positive");
  if (document_tokens.empty()) throw InputError("", 0, "docs", "expected at least one document");
  DocumentEnds ends;
  for (size_t i = 0; i < document_tokens.size(); ++i) {
    check_divisible(document_tokens[i], degree, zigzag, "docs",
                    "document " + std::to_string(i + 1) + "'s padded length");
    tokens_ += document_tokens[i];
    ends.push_back(tokens_);
  }
  if (ends.size() > 1) document_ends_ = std::make_shared<const DocumentEnds>(std::move(ends));
}

int64_t SequenceLayout::padded_length(int64_t tokens, int degree, bool zigzag) {
  const int64_t multiple = required_multiple(degree, zigzag);
  return (tokens + multiple - 1) / multiple * multiple;
}

std::vector<int64_t> SequenceLayout::padded_lengths(const std::vector<int64_t>& document_tokens, int degree,
                                                    bool zigzag) {
  std::vector<int64_t> padded;
  padded.reserve(document_tokens.size());
  for (const int64_t tokens : document_tokens) padded.push_back(padded_length(tokens, degree, zigzag));
  return padded;
}

SequenceLayout SequenceLayout::merged(int ranks_per_member) const {
  PARADYSE_CHECK(
      ranks_per_member >= 1 && degree() % ranks_per_member == 0,
      "members of " + std::to_string(ranks_per_member) + " ranks in a layout of " + std::to_string(degree()));
  SequenceLayout layout = *this;
  layout.ranks_per_member_ *= ranks_per_member;
  return layout;
}

Positions SequenceLayout::local(int member) const {
  Positions ranges;
  ranges.reserve(static_cast<std::size_t>(ranks_per_member_) * ranges_per_rank());
  for (int i = 0; i < ranks_per_member_; ++i) append_rank_tokens(member * ranks_per_member_ + i, ranges);
  return ranges;
}

std::size_t SequenceLayout::ranges_per_rank() const {
  return document_tokens_.size() * (zigzag_ ? 2 : 1);
}

void SequenceLayout::append_rank_tokens(int rank, Positions& ranges) const {
  int64_t begin = 0;
  for (const int64_t length : document_tokens_) {
    if (zigzag_) {
      const int64_t chunk = length / (2 * degree_);
      ranges.push_back({begin + rank * chunk, chunk});
      ranges.push_back({begin + (2 * degree_ - 1 - rank) * chunk, chunk});
    } else {
      ranges.push_back({begin + rank * (length / degree_), length / degree_});
    }
    begin += length;
  }
}

Positions SequenceLayout::gathered() const {
  Positions all;
  all.reserve(static_cast<std::size_t>(degree_) * ranges_per_rank());
  for (int rank = 0; rank < degree_; ++rank) append_rank_tokens(rank, all);
  return all;
}

}  // namespace paradyse
