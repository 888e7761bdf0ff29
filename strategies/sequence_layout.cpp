#include "strategies/sequence_layout.hpp"

#include <algorithm>
#include <map>
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
  for (int i = 0; i < ranks_per_member_; ++i) {
    const Positions own = rank_tokens(member * ranks_per_member_ + i);
    ranges.insert(ranges.end(), own.begin(), own.end());
  }
  return ranges;
}

Positions SequenceLayout::rank_tokens(int rank) const {
  Positions ranges;
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
  return ranges;
}

Positions SequenceLayout::gathered() const {
  Positions all;
  for (int rank = 0; rank < degree_; ++rank)
    for (const TokenRange& range : rank_tokens(rank)) all.push_back(range);
  return all;
}

namespace {

int64_t count(const Positions& positions) {
  int64_t n = 0;
  for (const TokenRange& r : positions) n += r.length;
  return n;
}

// Pairs (q, k) with q in [a, a+n), k in [c, c+m) and k ≤ q: Σ_q clamp(q − c + 1, 0, m).
double causal_pairs(const TokenRange& queries, const TokenRange& keys) {
  const int64_t a = queries.begin, n = queries.length, c = keys.begin, m = keys.length;
  // For q < c: 0. For c ≤ q < c+m−1: q−c+1 (rising). For q ≥ c+m−1: m.
  double pairs = 0;
  const int64_t rise_begin = std::max(a, c), rise_end = std::min(a + n, c + m - 1);  // [rise_begin, rise_end)
  if (rise_end > rise_begin) {
    const double first = static_cast<double>(rise_begin - c + 1),
                 last = static_cast<double>(rise_end - 1 - c + 1);
    pairs += (first + last) * static_cast<double>(rise_end - rise_begin) / 2;
  }
  const int64_t flat_begin = std::max(a, c + m - 1);
  if (a + n > flat_begin) pairs += static_cast<double>(m) * static_cast<double>(a + n - flat_begin);
  return pairs;
}

}  // namespace

int64_t AttentionMask::query_count() const {
  return count(queries);
}
int64_t AttentionMask::key_count() const {
  return count(keys);
}

namespace {

double pairs_of(bool causal, const TokenRange& q, const TokenRange& k) {
  return causal ? causal_pairs(q, k) : static_cast<double>(q.length) * static_cast<double>(k.length);
}

// The ranges cut at the documents' ends, each piece with its document's index, grouped by document.
std::map<size_t, Positions> by_document(const Positions& ranges, const DocumentEnds& ends) {
  std::map<size_t, Positions> pieces;
  for (const TokenRange& range : ranges) {
    for (int64_t begin = range.begin; begin < range.begin + range.length;) {
      const auto end = std::upper_bound(ends.begin(), ends.end(), begin);
      PARADYSE_CHECK(end != ends.end(), "a token position lies beyond the last document");
      const int64_t piece_end = std::min(range.begin + range.length, *end);
      pieces[static_cast<size_t>(end - ends.begin())].push_back({begin, piece_end - begin});
      begin = piece_end;
    }
  }
  return pieces;
}

}  // namespace

double AttentionMask::computed_pairs() const {
  double pairs = 0;
  if (!document_ends) {
    for (const TokenRange& q : queries)
      for (const TokenRange& k : keys) pairs += pairs_of(causal, q, k);
    return pairs;
  }
  const std::map<size_t, Positions> key_pieces = by_document(keys, *document_ends);
  for (const auto& [document, query_pieces] : by_document(queries, *document_ends)) {
    const auto same = key_pieces.find(document);
    if (same == key_pieces.end()) continue;
    for (const TokenRange& q : query_pieces)
      for (const TokenRange& k : same->second) pairs += pairs_of(causal, q, k);
  }
  return pairs;
}

int64_t AttentionMask::longest_document_keys() const {
  if (!document_ends) return key_count();
  int64_t longest = 0;
  for (const auto& [document, pieces] : by_document(keys, *document_ends))
    longest = std::max(longest, count(pieces));
  return longest;
}

}  // namespace paradyse
