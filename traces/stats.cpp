// Trace statistics: nearest-rank percentiles (see stats.hpp) and the paper's length buckets.
#include "traces/stats.hpp"

#include <algorithm>
#include <array>
#include <iterator>
#include <numeric>

#include "common/errors.hpp"

namespace paradyse::traces {
namespace {

constexpr int64_t K = 1024;
// Lower edges of the buckets after the first (ParaDySe, Ou et al., AAAI-26, Table 3).
constexpr std::array<int64_t, 6> bucket_edges = {4 * K, 8 * K, 16 * K, 32 * K, 64 * K, 128 * K};
constexpr std::array<const char*, 7> bucket_labels = {"<4K",    "4-8K",    "8-16K", "16-32K",
                                                      "32-64K", "64-128K", ">=128K"};

// The sample at rank ceil(percent/100 · n); integer arithmetic, so no rounding can move a rank.
int64_t nearest_rank(const std::vector<int64_t>& sorted, int64_t percent) {
  const auto n = static_cast<int64_t>(sorted.size());
  const int64_t rank = std::max<int64_t>(1, (percent * n + 99) / 100);
  return sorted[static_cast<std::size_t>(rank - 1)];
}

}  // namespace

TraceStats trace_stats(const std::vector<int64_t>& lengths) {
  PARADYSE_CHECK(!lengths.empty(), "statistics of an empty trace");
  std::vector<int64_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  PARADYSE_CHECK(sorted.front() >= 0, "a negative length in a trace");

  TraceStats stats;
  stats.count = static_cast<int64_t>(sorted.size());
  stats.total_tokens = std::accumulate(sorted.begin(), sorted.end(), int64_t{0});
  stats.mean = static_cast<double>(stats.total_tokens) / static_cast<double>(stats.count);
  stats.min = sorted.front();
  stats.median = nearest_rank(sorted, 50);
  stats.p90 = nearest_rank(sorted, 90);
  stats.p99 = nearest_rank(sorted, 99);
  stats.max = sorted.back();

  auto begin = sorted.begin();
  for (std::size_t bucket = 0; bucket < bucket_labels.size(); ++bucket) {
    const auto end = bucket < bucket_edges.size()
                         ? std::lower_bound(begin, sorted.end(), bucket_edges[bucket])
                         : sorted.end();
    const auto count = static_cast<int64_t>(std::distance(begin, end));
    stats.buckets.push_back(
        {bucket_labels[bucket], count, static_cast<double>(count) / static_cast<double>(stats.count)});
    begin = end;
  }
  return stats;
}

}  // namespace paradyse::traces
