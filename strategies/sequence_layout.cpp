#include "strategies/sequence_layout.hpp"

#include <algorithm>
#include <string>

#include "common/errors.hpp"

namespace paradyse {

SequenceLayout::SequenceLayout(int64_t tokens, int degree, bool zigzag)
    : tokens_(tokens), degree_(degree), zigzag_(zigzag) {
  PARADYSE_CHECK(degree >= 1, "degree must be positive");
  const int64_t multiple = required_multiple(degree, zigzag);
  if (tokens <= 0 || tokens % multiple != 0)
    throw InputError(
        "", 0, "seq",
        "expected a sequence length that is a positive multiple of " + std::to_string(multiple) +
            (zigzag ? " (2 × degree: causal models split each rank's tokens into two zig-zag chunks)"
                    : " (the degree)") +
            ", got " + std::to_string(tokens));
}

int64_t SequenceLayout::padded_length(int64_t tokens, int degree, bool zigzag) {
  const int64_t multiple = required_multiple(degree, zigzag);
  return (tokens + multiple - 1) / multiple * multiple;
}

Positions SequenceLayout::local(int rank) const {
  if (!zigzag_) return {{rank * local_tokens(), local_tokens()}};
  const int64_t chunk = tokens_ / (2 * degree_);
  return {{rank * chunk, chunk}, {(2 * degree_ - 1 - rank) * chunk, chunk}};
}

Positions SequenceLayout::gathered() const {
  Positions all;
  for (int rank = 0; rank < degree_; ++rank)
    for (const TokenRange& range : local(rank)) all.push_back(range);
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

double AttentionMask::computed_pairs() const {
  if (!causal) return static_cast<double>(query_count()) * static_cast<double>(key_count());
  double pairs = 0;
  for (const TokenRange& q : queries)
    for (const TokenRange& k : keys) pairs += causal_pairs(q, k);
  return pairs;
}

}  // namespace paradyse
