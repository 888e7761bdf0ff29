// Preparing a trace for a run: each rule for lengths over the cap, the orders, sampling and the limit,
// and options out of range.
#include "traces/prepare.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/errors.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;
using namespace paradyse::traces;

namespace {

Trace small_trace() {
  return {"small", "crafted", {10, 50, 25, 120, 7}, 0};
}

Trace counting_trace(int64_t samples) {
  Trace trace{"counting", "1, 2, ..., n", std::vector<int64_t>(static_cast<std::size_t>(samples)), 0};
  std::iota(trace.lengths.begin(), trace.lengths.end(), 1);
  return trace;
}

int64_t sum(const std::vector<int64_t>& lengths) {
  return std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
}

std::vector<int64_t> sorted(std::vector<int64_t> lengths) {
  std::sort(lengths.begin(), lengths.end());
  return lengths;
}

}  // namespace

TEST_CASE("prepare: without options, the trace as it is", "[traces]") {
  const PreparedTrace prepared = prepare(small_trace(), {});
  REQUIRE(prepared.lengths == small_trace().lengths);
  REQUIRE(prepared.over_max == 0);
  REQUIRE_THAT(prepared.description, Catch::Contains("5 samples") && Catch::Contains("in dataset order") &&
                                         Catch::Contains("5 sequences, 212 tokens."));
}

TEST_CASE("prepare: each rule for lengths over max_len", "[traces]") {
  PrepareOptions options;
  options.max_len = 40;
  SECTION("drop removes them") {
    options.over = OverRule::drop;
    const PreparedTrace prepared = prepare(small_trace(), options);
    REQUIRE(prepared.lengths == std::vector<int64_t>{10, 25, 7});
    REQUIRE(prepared.over_max == 2);
    REQUIRE(prepared.dropped == 2);
    REQUIRE(prepared.truncated == 0);
    REQUIRE(prepared.split_pieces == 0);
    REQUIRE_THAT(prepared.description, Catch::Contains("2 longer than 40 tokens, dropped"));
  }
  SECTION("truncate caps them") {
    options.over = OverRule::truncate;
    const PreparedTrace prepared = prepare(small_trace(), options);
    REQUIRE(prepared.lengths == std::vector<int64_t>{10, 40, 25, 40, 7});
    REQUIRE(prepared.over_max == 2);
    REQUIRE(prepared.truncated == 2);
    REQUIRE(prepared.dropped == 0);
    REQUIRE_THAT(prepared.description, Catch::Contains("truncated to 40"));
  }
  SECTION("split gives pieces of max_len and a remainder, in place, and keeps every token") {
    options.over = OverRule::split;
    const PreparedTrace prepared = prepare(small_trace(), options);
    // 50 → 40 + 10; 120 → 40 + 40 + 40 (no remainder).
    REQUIRE(prepared.lengths == std::vector<int64_t>{10, 40, 10, 25, 40, 40, 40, 7});
    REQUIRE(prepared.over_max == 2);
    REQUIRE(prepared.split_pieces == 5);
    REQUIRE(sum(prepared.lengths) == sum(small_trace().lengths));
    REQUIRE_THAT(prepared.description, Catch::Contains("split into 5 pieces of at most 40"));
  }
  SECTION("a length equal to max_len is not over it") {
    options.max_len = 50;
    const PreparedTrace prepared = prepare(small_trace(), options);
    REQUIRE(prepared.lengths == std::vector<int64_t>{10, 50, 25, 7});
    REQUIRE(prepared.over_max == 1);
  }
  SECTION("dropping every sample is an error naming --max-len") {
    options.max_len = 5;
    REQUIRE_THROWS_WITH(prepare(small_trace(), options), Catch::StartsWith("--max-len: "));
  }
}

TEST_CASE("prepare: sorted order is non-decreasing and holds the same lengths", "[traces]") {
  PrepareOptions options;
  options.order = Order::sorted;
  options.max_len = 40;
  options.over = OverRule::split;
  const PreparedTrace prepared = prepare(small_trace(), options);
  REQUIRE(std::is_sorted(prepared.lengths.begin(), prepared.lengths.end()));
  REQUIRE(prepared.lengths == std::vector<int64_t>{7, 10, 10, 25, 40, 40, 40, 40});
  REQUIRE_THAT(prepared.description, Catch::Contains("sorted short to long"));
}

TEST_CASE("prepare: shuffled order is a permutation, the same for the same seed", "[traces]") {
  const Trace trace = counting_trace(1000);
  PrepareOptions options;
  options.order = Order::shuffled;
  options.seed = 11;
  const PreparedTrace first = prepare(trace, options);
  REQUIRE(first.lengths != trace.lengths);
  REQUIRE(sorted(first.lengths) == trace.lengths);
  REQUIRE(prepare(trace, options).lengths == first.lengths);
  options.seed = 12;
  REQUIRE(prepare(trace, options).lengths != first.lengths);
  REQUIRE_THAT(first.description, Catch::Contains("shuffled (seed 11)"));
}

TEST_CASE("prepare: sampling keeps about the given share, in dataset order, reproducibly", "[traces]") {
  const Trace trace = counting_trace(10000);
  PrepareOptions options;
  options.sample = 0.25;
  options.seed = 5;
  const PreparedTrace prepared = prepare(trace, options);
  // Binomial(10000, 0.25): standard deviation ~43, so ±250 is more than 5 of them.
  REQUIRE(prepared.lengths.size() > 2250);
  REQUIRE(prepared.lengths.size() < 2750);
  REQUIRE(std::is_sorted(prepared.lengths.begin(), prepared.lengths.end()));  // a subsequence of 1..n
  REQUIRE(std::adjacent_find(prepared.lengths.begin(), prepared.lengths.end()) == prepared.lengths.end());
  REQUIRE(prepare(trace, options).lengths == prepared.lengths);
  REQUIRE_THAT(prepared.description, Catch::Contains("each kept with probability 0.25 (seed 5): " +
                                                     std::to_string(prepared.lengths.size()) + " kept"));
}

TEST_CASE("prepare: the limit takes the first samples after sampling", "[traces]") {
  const Trace trace = counting_trace(1000);
  PrepareOptions options;
  options.limit = 10;
  REQUIRE(prepare(trace, options).lengths == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});

  options.sample = 0.5;
  options.seed = 9;
  options.limit = 0;
  const std::vector<int64_t> sampled = prepare(trace, options).lengths;
  options.limit = 10;
  const PreparedTrace limited = prepare(trace, options);
  REQUIRE(limited.lengths == std::vector<int64_t>(sampled.begin(), sampled.begin() + 10));
  REQUIRE_THAT(limited.description, Catch::Contains("the first 10 of them"));

  options.limit = 100000;  // more than the trace: all of it
  REQUIRE(prepare(trace, options).lengths == sampled);
}

TEST_CASE("prepare: the cap applies after the limit, the order after the cap", "[traces]") {
  PrepareOptions options;
  options.limit = 2;  // 10, 50
  options.max_len = 40;
  options.over = OverRule::split;
  options.order = Order::sorted;
  const PreparedTrace prepared = prepare(small_trace(), options);
  REQUIRE(prepared.lengths == std::vector<int64_t>{10, 10, 40});
  REQUIRE(prepared.over_max == 1);
  REQUIRE(prepared.split_pieces == 2);
}

TEST_CASE("prepare and its parsers: bad options are InputErrors naming the flag", "[traces]") {
  const auto fails_naming = [](const PrepareOptions& options, const std::string& flag) {
    INFO(flag);
    try {
      prepare(small_trace(), options);
    } catch (const InputError& e) {
      REQUIRE(e.file() == flag);
      return;
    }
    FAIL("prepare accepted a bad " << flag);
  };
  for (double sample : {0.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    PrepareOptions options;
    options.sample = sample;
    fails_naming(options, "--sample");
  }
  PrepareOptions negative_limit;
  negative_limit.limit = -1;
  fails_naming(negative_limit, "--limit");
  PrepareOptions negative_cap;
  negative_cap.max_len = -1;
  fails_naming(negative_cap, "--max-len");
  PrepareOptions keeps_nothing;
  keeps_nothing.sample = 1e-9;
  fails_naming(keeps_nothing, "--sample");

  REQUIRE(parse_order("dataset") == Order::dataset);
  REQUIRE(parse_order("sorted") == Order::sorted);
  REQUIRE(parse_order("shuffled") == Order::shuffled);
  REQUIRE_THROWS_WITH(parse_order("random"), "--order: expected dataset, sorted or shuffled, got 'random'");
  REQUIRE(parse_over_rule("drop") == OverRule::drop);
  REQUIRE(parse_over_rule("truncate") == OverRule::truncate);
  REQUIRE(parse_over_rule("split") == OverRule::split);
  REQUIRE_THROWS_WITH(parse_over_rule("pad"), "--over: expected drop, truncate or split, got 'pad'");
}

TEST_CASE("prepare: a run of more sequences than a compare holds is refused before they are made",
          "[traces]") {
  // Split into pieces of one token, 2^12 samples of 2^17 tokens are 2^29 sequences: twice the bound.
  const auto source =
      std::make_shared<const TraceSource>(Trace{"long", "crafted", std::vector<int64_t>(4096, 1 << 17), 0});
  PrepareOptions options;
  options.max_len = 1;
  options.over = OverRule::split;
  try {
    const PreparedLengths prepared(source, options);
    FAIL(prepared.sequences() << " sequences prepared");
  } catch (const InputError& e) {
    CHECK(e.file() == "--max-len");
    CHECK_THAT(e.message(),
               Catch::StartsWith("expected a run of at most 268435456 sequences, got 536870912"));
  }
  options.max_len = 2;  // 2^28 pieces: at the bound, counted without making them
  const PreparedLengths prepared(source, options);
  CHECK(prepared.sequences() == int64_t{1} << 28);
  CHECK(prepared.tokens() == int64_t{1} << 29);
  CHECK(prepared.split_pieces() == int64_t{1} << 28);
}

TEST_CASE("prepared lengths: a plain trace file read as the run goes gives what it gives in memory",
          "[traces]") {
  testing::TempDir dir;
  std::string text = "# trace: counting\n";
  for (int64_t i = 1; i <= 5000; ++i) text += std::to_string(i * 7 % 1000 + 1) + "\n";
  const std::string path = dir.write("t.txt", text);
  const auto streamed = std::make_shared<const TraceSource>(TraceSource::open(path));
  const auto whole = std::make_shared<const TraceSource>(load_trace(path));
  for (const Order order : {Order::dataset, Order::sorted, Order::shuffled})
    for (const double sample : {1.0, 0.3})
      for (const int64_t limit : {int64_t{0}, int64_t{700}})
        for (const OverRule over : {OverRule::drop, OverRule::truncate, OverRule::split}) {
          const PrepareOptions options{
              .order = order, .seed = 5, .max_len = 600, .over = over, .sample = sample, .limit = limit};
          CAPTURE(static_cast<int>(order), sample, limit, static_cast<int>(over));
          const PreparedLengths from_file(streamed, options), from_memory(whole, options);
          const std::vector<int64_t> lengths = from_file.lengths();
          CHECK(lengths == from_memory.lengths());
          CHECK(lengths == from_file.lengths());  // read again, the same
          CHECK(from_file.description() == from_memory.description());
          CHECK(static_cast<int64_t>(lengths.size()) == from_file.sequences());
          CHECK(sum(lengths) == from_file.tokens());
        }
}
