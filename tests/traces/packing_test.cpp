// traces/packing.cpp: global batches of a token budget in run order, packed by first-fit decreasing.
#include "traces/packing.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>

#include "common/errors.hpp"

namespace paradyse::testing {
namespace {

int64_t padded(int64_t tokens, int64_t quantum) {
  return (tokens + quantum - 1) / quantum * quantum;
}

TEST_CASE("packing: first-fit decreasing by padded length, a step per token budget, in run order",
          "[traces]") {
  // Budget 100 tokens a step, micro-batches of 64 padded tokens, quantum 8. Step 1 takes 40, 30, 20 and
  // 10 (100; 70 more would pass it); step 2 takes 70 and 15. Step 1, longest first: 40 opens a
  // micro-batch; 30 (padded 32) does not fit beside it (72 > 64) and opens a second; 20 (24) fits the
  // first (64); 10 (16) no longer fits the first and joins the second (48). Step 2: 70 (72 > 64) is a
  // micro-batch of its own, and 15 (16) opens another.
  const traces::TrainingSchedule schedule = traces::packed_steps(
      {40, 30, 20, 10, 70, 15}, {.global_batch_tokens = 100, .micro_batch_tokens = 64, .quantum = 8});
  CHECK(schedule.steps == 2);
  CHECK(schedule.micro_batches == std::vector<std::vector<int64_t>>{{40, 20}, {30, 10}, {70}, {15}});
  CHECK(schedule.step_of == std::vector<int64_t>{0, 0, 1, 1});
}

TEST_CASE("packing: every sequence once, within the budgets, on random traces", "[traces]") {
  std::mt19937 random(5);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int64_t> lengths;
    for (int i = 0, n = 1 + static_cast<int>(random() % 300); i < n; ++i)
      lengths.push_back(1 + static_cast<int64_t>(random() % (trial % 2 == 0 ? 5000 : 300)));
    const traces::PackingOptions options{
        .global_batch_tokens = 8192, .micro_batch_tokens = 2048, .quantum = 16};
    const traces::TrainingSchedule schedule = traces::packed_steps(lengths, options);
    INFO("trial " << trial);
    std::vector<int64_t> seen;
    std::vector<int64_t> step_tokens(static_cast<std::size_t>(schedule.steps), 0);
    for (std::size_t m = 0; m < schedule.micro_batches.size(); ++m) {
      const std::vector<int64_t>& micro_batch = schedule.micro_batches[m];
      int64_t padded_sum = 0;
      for (const int64_t tokens : micro_batch) padded_sum += padded(tokens, options.quantum);
      REQUIRE((padded_sum <= options.micro_batch_tokens || micro_batch.size() == 1));
      step_tokens[static_cast<std::size_t>(schedule.step_of[m])] +=
          std::accumulate(micro_batch.begin(), micro_batch.end(), int64_t{0});
      if (m > 0) REQUIRE(schedule.step_of[m] >= schedule.step_of[m - 1]);
      seen.insert(seen.end(), micro_batch.begin(), micro_batch.end());
    }
    for (const int64_t tokens : step_tokens) REQUIRE((tokens > 0 && tokens <= options.global_batch_tokens));
    // Steps take consecutive sequences: each step's multiset is a run of the trace.
    std::vector<int64_t> sorted_seen = seen, sorted_lengths = lengths;
    std::sort(sorted_seen.begin(), sorted_seen.end());
    std::sort(sorted_lengths.begin(), sorted_lengths.end());
    REQUIRE(sorted_seen == sorted_lengths);
  }
}

TEST_CASE("packing: one sequence per micro-batch, N a step, without packing", "[traces]") {
  const traces::TrainingSchedule schedule = traces::unpacked_steps({5, 6, 7, 8, 9}, 2);
  CHECK(schedule.steps == 3);
  CHECK(schedule.micro_batches == std::vector<std::vector<int64_t>>{{5}, {6}, {7}, {8}, {9}});
  CHECK(schedule.step_of == std::vector<int64_t>{0, 0, 1, 1, 2});
}

TEST_CASE("packing: budgets below the layout quantum or one sequence are refused", "[traces]") {
  CHECK_THROWS_WITH(
      traces::packed_steps({100}, {.global_batch_tokens = 1000, .micro_batch_tokens = 8, .quantum = 16}),
      Catch::Contains("--micro-batch-tokens") && Catch::Contains("quantum of 16"));
  CHECK_THROWS_WITH(
      traces::packed_steps({100, 2000, 5},
                           {.global_batch_tokens = 1000, .micro_batch_tokens = 512, .quantum = 16}),
      Catch::Contains("--global-batch-tokens") && Catch::Contains("smaller than sequence 2 (2000 tokens)"));
  CHECK_THROWS_WITH(
      traces::packed_steps({100, 0}, {.global_batch_tokens = 1000, .micro_batch_tokens = 512, .quantum = 16}),
      Catch::Contains("at least one token") && Catch::Contains("sequence 2"));
}

TEST_CASE("packing: steps built a sequence at a time and taken in runs are the steps built at once",
          "[traces]") {
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < 3000; ++i) lengths.push_back(1 + i * 7919 % 20000);
  const traces::PackingOptions packing{
      .global_batch_tokens = 65536, .micro_batch_tokens = 16384, .quantum = 16};
  for (const bool packed : {false, true}) {
    CAPTURE(packed);
    const traces::TrainingSchedule whole =
        packed ? traces::packed_steps(lengths, packing) : traces::unpacked_steps(lengths, 3);
    traces::ScheduleBuilder builder =
        packed ? traces::ScheduleBuilder::packed(packing) : traces::ScheduleBuilder::unpacked(3);
    traces::TrainingSchedule joined;
    const auto take = [&] {
      traces::TrainingSchedule part = builder.take();
      CHECK(part.first_micro_batch == static_cast<int64_t>(joined.micro_batches.size()));
      if (!part.step_of.empty()) CHECK(part.steps == part.step_of.back() - part.step_of.front() + 1);
      joined.micro_batches.insert(joined.micro_batches.end(), part.micro_batches.begin(),
                                  part.micro_batches.end());
      joined.step_of.insert(joined.step_of.end(), part.step_of.begin(), part.step_of.end());
      joined.steps += part.steps;
    };
    for (const int64_t length : lengths) {
      builder.add(length);
      if (builder.ready() >= 100) take();
    }
    builder.close();
    take();
    CHECK(joined.micro_batches == whole.micro_batches);
    CHECK(joined.step_of == whole.step_of);
    CHECK(joined.steps == whole.steps);
  }
}

}  // namespace
}  // namespace paradyse::testing
