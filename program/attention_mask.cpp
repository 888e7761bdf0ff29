#include "program/attention_mask.hpp"

#include <algorithm>
#include <map>

#include "common/errors.hpp"

namespace paradyse {

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
