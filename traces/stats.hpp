// Summary statistics of a length trace, with the length buckets of ParaDySe (Ou et al., AAAI-26, Table 3),
// so that a trace can be compared with the distributions the paper trained on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace paradyse::traces {

struct Bucket {
  std::string label;  // "<4K", "4-8K", ..., ">=128K" (K = 1024 tokens; lower edge in, upper edge out)
  int64_t count = 0;
  double fraction = 0;  // of all samples
};

struct TraceStats {
  int64_t count = 0;
  int64_t total_tokens = 0;
  double mean = 0;
  int64_t min = 0, median = 0, p90 = 0, p99 = 0, max = 0;
  std::vector<Bucket> buckets;  // <4K, 4-8K, 8-16K, 16-32K, 32-64K, 64-128K, >=128K
};

// Percentiles by the nearest-rank method: the p-th percentile of n sorted samples is the one at rank
// ceil(p/100 · n) (1-based), always a sample of the trace, never an interpolation; median = p50. The
// real traces' "# stats:" headers use the same method. `lengths` must be non-empty and non-negative.
TraceStats trace_stats(const std::vector<int64_t>& lengths);

}  // namespace paradyse::traces
