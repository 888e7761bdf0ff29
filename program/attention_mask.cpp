#include "program/attention_mask.hpp"

#include <algorithm>
#include <array>
#include <unordered_map>
#include <vector>

#include <boost/container/small_vector.hpp>

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

// A range's piece within one document, and that document's index.
struct DocumentPiece {
  size_t document = 0;
  TokenRange range;
};

// The ranges' positions cut at the documents' ends, grouped by document in ascending order (a flat list:
// packed micro-batches hold thousands of documents, and attention asks for every block's pairs). Ranges
// that continue one another are joined first: a gathered sequence lists each document as a chunk per
// rank, in rank order, and becomes one piece per document.
using DocumentPieces = boost::container::small_vector<DocumentPiece, 8>;

DocumentPieces by_document(const Positions& ranges, const DocumentEnds& ends) {
  const auto by_begin = [](const TokenRange& a, const TokenRange& b) { return a.begin < b.begin; };
  boost::container::small_vector<TokenRange, 8> joined(ranges.begin(), ranges.end());
  if (!std::is_sorted(joined.begin(), joined.end(), by_begin))
    std::sort(joined.begin(), joined.end(), by_begin);
  std::size_t kept = 0;
  for (const TokenRange& range : joined) {
    if (range.length == 0) continue;
    if (kept > 0 && joined[kept - 1].begin + joined[kept - 1].length == range.begin)
      joined[kept - 1].length += range.length;
    else
      joined[kept++] = range;
  }
  joined.resize(kept);
  DocumentPieces pieces;
  for (const TokenRange& range : joined) {
    for (int64_t begin = range.begin; begin < range.begin + range.length;) {
      const auto end = std::upper_bound(ends.begin(), ends.end(), begin);
      PARADYSE_CHECK(end != ends.end(), "a token position lies beyond the last document");
      const int64_t piece_end = std::min(range.begin + range.length, *end);
      pieces.push_back({static_cast<size_t>(end - ends.begin()), {begin, piece_end - begin}});
      begin = piece_end;
    }
  }
  // Overlapping ranges (a position listed twice) can leave a piece behind an earlier document's.
  const auto by_index = [](const DocumentPiece& a, const DocumentPiece& b) {
    return a.document < b.document;
  };
  if (!std::is_sorted(pieces.begin(), pieces.end(), by_index))
    std::stable_sort(pieces.begin(), pieces.end(), by_index);
  return pieces;
}

// Calls visit(document, first, last) for each document's run [first, last) of `pieces`.
template <typename Visit>
void for_each_document(const DocumentPieces& pieces, const Visit& visit) {
  for (auto first = pieces.begin(); first != pieces.end();) {
    auto last = first;
    while (last != pieces.end() && last->document == first->document) ++last;
    visit(first->document, first, last);
    first = last;
  }
}

// Pairs within documents (each document's query pieces against its key pieces) and the most keys of one
// document.
AttentionMask::Counts document_counts(bool causal, const Positions& queries, const Positions& keys,
                                      const DocumentEnds& ends) {
  AttentionMask::Counts counts;
  const DocumentPieces key_pieces = by_document(keys, ends);
  for_each_document(key_pieces, [&](size_t, auto first, auto last) {
    int64_t keys_in_document = 0;
    for (auto piece = first; piece != last; ++piece) keys_in_document += piece->range.length;
    counts.longest_document_keys = std::max(counts.longest_document_keys, keys_in_document);
  });
  auto key_run = key_pieces.begin();
  // One document's keys in position order, and the keys before each: a query piece sees every key of
  // the pieces that end before it, and pairs_of with the few it overlaps. Every term is a whole number
  // below 2^53, so the sum is exact in any order.
  boost::container::small_vector<TokenRange, 8> document_keys;
  boost::container::small_vector<int64_t, 9> keys_before;
  for_each_document(by_document(queries, ends), [&](size_t document, auto first, auto last) {
    while (key_run != key_pieces.end() && key_run->document < document) ++key_run;
    document_keys.clear();
    for (auto k = key_run; k != key_pieces.end() && k->document == document; ++k)
      document_keys.push_back(k->range);
    if (document_keys.empty()) return;
    std::sort(document_keys.begin(), document_keys.end(),
              [](const TokenRange& a, const TokenRange& b) { return a.begin < b.begin; });
    keys_before.assign(1, 0);
    for (const TokenRange& k : document_keys) keys_before.push_back(keys_before.back() + k.length);
    for (auto q = first; q != last; ++q) {
      const TokenRange& range = q->range;
      if (!causal) {
        counts.pairs += static_cast<double>(range.length) * static_cast<double>(keys_before.back());
        continue;
      }
      // Key pieces that end at or before the query piece's first position precede all of it.
      const auto overlapping =
          std::partition_point(document_keys.begin(), document_keys.end(),
                               [&](const TokenRange& k) { return k.begin + k.length <= range.begin; });
      counts.pairs +=
          static_cast<double>(range.length) *
          static_cast<double>(keys_before[static_cast<std::size_t>(overlapping - document_keys.begin())]);
      for (auto k = overlapping; k != document_keys.end() && k->begin < range.begin + range.length; ++k)
        counts.pairs += causal_pairs(range, *k);
    }
  });
  return counts;
}

// The counts of the masks counted lately on this thread. A traced step asks for the same masks over and
// over (every layer, forward and backward, and every rank of a group that gathers the whole sequence),
// and a count costs its document pieces' binary searches and sorting where a look-up costs one pass
// over the mask's ranges. Keyed by their hash; an entry is used only when equal in full.
struct CountedMask {
  bool causal = false;
  Positions queries, keys;
  std::shared_ptr<const DocumentEnds> ends;  // held, not copied: a rank's masks share their documents
  AttentionMask::Counts counts;
};

// splitmix64's finaliser: every input bit reaches every output bit.
uint64_t mixed(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

// A hash of `count` numbers value(0), value(1), … in four independent chains (a gathered mask holds
// thousands of ranges, and one chain would wait on each multiplication in turn), joined at the end.
template <typename Value>
uint64_t numbers_hash(std::size_t count, uint64_t seed, const Value& value) {
  constexpr uint64_t kOdd = 0xff51afd7ed558ccdu;
  std::array<uint64_t, 4> lanes{seed, seed + 1, seed + 2, seed + 3};
  std::size_t i = 0;
  for (; i + 4 <= count; i += 4)
    for (std::size_t lane = 0; lane < 4; ++lane) lanes[lane] = (lanes[lane] ^ value(i + lane)) * kOdd;
  for (; i < count; ++i) lanes[i % 4] = (lanes[i % 4] ^ value(i)) * kOdd;
  uint64_t hash = mixed(seed ^ count);
  for (const uint64_t lane : lanes) hash = mixed(hash ^ lane);
  return hash;
}

uint64_t ranges_hash(const Positions& ranges, uint64_t seed) {
  return numbers_hash(2 * ranges.size(), seed, [&ranges](std::size_t i) {
    const TokenRange& range = ranges[i / 2];
    return static_cast<uint64_t>(i % 2 == 0 ? range.begin : range.length);
  });
}

// The documents' part of a mask's hash: thousands of ends, shared by every mask of a micro-batch, so
// hashed once for as long as the same ends come back.
uint64_t ends_hash(const std::shared_ptr<const DocumentEnds>& document_ends) {
  thread_local std::shared_ptr<const DocumentEnds> last;
  thread_local uint64_t last_hash = 0;
  if (document_ends == last) return last_hash;
  const DocumentEnds& ends = *document_ends;
  last_hash = numbers_hash(ends.size(), 3, [&ends](std::size_t i) { return static_cast<uint64_t>(ends[i]); });
  last = document_ends;
  return last_hash;
}

uint64_t mask_hash(bool causal, const Positions& queries, const Positions& keys,
                   const std::shared_ptr<const DocumentEnds>& document_ends) {
  return mixed(ranges_hash(queries, causal ? 1 : 2) ^ mixed(ranges_hash(keys, 4) ^ ends_hash(document_ends)));
}

bool same_ranges(const Positions& a, const Positions& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const TokenRange& x, const TokenRange& y) {
    return x.begin == y.begin && x.length == y.length;
  });
}

AttentionMask::Counts remembered_document_counts(bool causal, const Positions& queries, const Positions& keys,
                                                 const std::shared_ptr<const DocumentEnds>& document_ends) {
  constexpr std::size_t kRemembered = 1024;
  const DocumentEnds& ends = *document_ends;
  thread_local std::unordered_map<uint64_t, CountedMask> counted;
  const uint64_t hash = mask_hash(causal, queries, keys, document_ends);
  if (const auto found = counted.find(hash); found != counted.end()) {
    const CountedMask& mask = found->second;
    if (mask.causal == causal && (mask.ends == document_ends || *mask.ends == ends) &&
        same_ranges(mask.queries, queries) && same_ranges(mask.keys, keys))
      return mask.counts;
    return document_counts(causal, queries, keys, ends);  // another mask of the same hash
  }
  if (counted.size() >= kRemembered) counted.clear();
  const AttentionMask::Counts counts = document_counts(causal, queries, keys, ends);
  counted.emplace(hash, CountedMask{causal, queries, keys, document_ends, counts});
  return counts;
}

}  // namespace

const AttentionMask::Counts& AttentionMask::counts() const {
  if (counted_) return *counted_;
  if (document_ends)
    return counted_.emplace(remembered_document_counts(causal, queries, keys, document_ends));
  Counts counts;
  for (const TokenRange& q : queries)
    for (const TokenRange& k : keys) counts.pairs += pairs_of(causal, q, k);
  counts.longest_document_keys = key_count();
  return counted_.emplace(counts);
}

}  // namespace paradyse
