// Trace statistics against values worked out by hand: nearest-rank percentiles at the edge sizes, and
// the paper's buckets with samples on their edges.
#include "traces/stats.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>

#include "traces/trace.hpp"

using namespace paradyse::traces;

TEST_CASE("stats of the crafted trace match the values worked out by hand", "[traces]") {
  const Trace trace = load_trace("tests/traces/data/crafted.txt");
  REQUIRE(trace.empty_samples == 2);
  const TraceStats stats = trace_stats(trace.lengths);
  // Sorted: 100, 4095, 4096, 8191, 8192, 16383, 16384, 32767, 32768, 65535, 65536, 131071, 131072, 500000.
  REQUIRE(stats.count == 14);
  REQUIRE(stats.total_tokens == 1016190);
  REQUIRE(stats.mean == Approx(72585.0));  // 1016190 / 14
  REQUIRE(stats.min == 100);
  REQUIRE(stats.median == 16384);  // rank ceil(0.50 · 14) = 7
  REQUIRE(stats.p90 == 131072);    // rank ceil(0.90 · 14) = ceil(12.6) = 13
  REQUIRE(stats.p99 == 500000);    // rank ceil(0.99 · 14) = ceil(13.86) = 14
  REQUIRE(stats.max == 500000);
  // Each bucket holds its lower edge and one below its upper edge: two samples each.
  const char* labels[] = {"<4K", "4-8K", "8-16K", "16-32K", "32-64K", "64-128K", ">=128K"};
  REQUIRE(stats.buckets.size() == 7);
  for (std::size_t i = 0; i < 7; ++i) {
    INFO(labels[i]);
    REQUIRE(stats.buckets[i].label == labels[i]);
    REQUIRE(stats.buckets[i].count == 2);
    REQUIRE(stats.buckets[i].fraction == Approx(2.0 / 14));
  }
}

TEST_CASE("nearest-rank percentiles at edge sizes", "[traces]") {
  SECTION("one sample: every statistic is that sample") {
    const TraceStats stats = trace_stats({777});
    REQUIRE(stats.min == 777);
    REQUIRE(stats.median == 777);
    REQUIRE(stats.p90 == 777);
    REQUIRE(stats.p99 == 777);
    REQUIRE(stats.max == 777);
    REQUIRE(stats.mean == Approx(777));
    REQUIRE(stats.buckets[0].count == 1);
  }
  SECTION("two samples: the median is the lower one, p90 and p99 the upper") {
    const TraceStats stats = trace_stats({20000, 10});
    REQUIRE(stats.median == 10);  // rank ceil(1.0) = 1
    REQUIRE(stats.p90 == 20000);  // rank ceil(1.8) = 2
    REQUIRE(stats.p99 == 20000);  // rank ceil(1.98) = 2
    REQUIRE(stats.mean == Approx(10005));
    REQUIRE(stats.buckets[0].count == 1);  // 10
    REQUIRE(stats.buckets[3].count == 1);  // 20000 in 16-32K
  }
  SECTION("1 to 100 in any order: the p-th percentile is p") {
    std::vector<int64_t> lengths(100);
    std::iota(lengths.begin(), lengths.end(), 1);
    std::shuffle(lengths.begin(), lengths.end(), std::mt19937_64(3));
    const TraceStats stats = trace_stats(lengths);
    REQUIRE(stats.count == 100);
    REQUIRE(stats.total_tokens == 5050);
    REQUIRE(stats.min == 1);
    REQUIRE(stats.median == 50);
    REQUIRE(stats.p90 == 90);
    REQUIRE(stats.p99 == 99);
    REQUIRE(stats.max == 100);
    REQUIRE(stats.buckets[0].count == 100);
    REQUIRE(stats.buckets[0].fraction == 1.0);
  }
  SECTION("101 samples: ranks round up") {
    std::vector<int64_t> lengths(101);
    std::iota(lengths.begin(), lengths.end(), 1);
    const TraceStats stats = trace_stats(lengths);
    REQUIRE(stats.median == 51);  // rank ceil(50.5)
    REQUIRE(stats.p90 == 91);     // rank ceil(90.9)
    REQUIRE(stats.p99 == 100);    // rank ceil(99.99)
  }
}
