// The length grid of compare runs over whole traces: lengths up to 64 layout quanta and grid lengths
// are simulated exactly, every other length is read off the line between two grid lengths, which
// must stay close to a direct simulation while simulating far fewer lengths; the error it reports
// is the error it made.
#include "evaluation/simulated_times.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "hw_models/cluster.hpp"
#include "strategies/library.hpp"

namespace paradyse::testing {
namespace {

constexpr int kDegree = 8;
constexpr int64_t kQuantum = 2 * kDegree;  // causal: two zig-zag chunks per rank

double direct_s(steps::StepSimulator& simulator, const Plan& plan, int64_t tokens) {
  return simulator.simulate(plan, {.tokens = tokens, .degree = kDegree, .batch = 1}).iteration_time_s;
}

}  // namespace

TEST_CASE("simulated times: lengths up to 64 quanta are simulated exactly, each once", "[evaluation][grid]") {
  steps::StepSimulator simulator(load_model("tiny-gpt"), hw::load_cluster("dgx-a100"));
  evaluation::SimulatedTimes times(simulator, kDegree, 1, 1.05);
  const Plan plan = uniform_plan(megatron_ts(), 2);
  // Equal but for rounding: SimGrid's clock runs on across simulations, and a time is a difference of
  // its readings.
  for (int64_t tokens : {kQuantum, 7 * kQuantum, 64 * kQuantum})
    CHECK(times.seconds(plan, tokens) == Approx(direct_s(simulator, plan, tokens)).epsilon(1e-9));
  CHECK(times.seconds(plan, 7 * kQuantum) == Approx(direct_s(simulator, plan, 7 * kQuantum)).epsilon(1e-9));
  CHECK(times.simulations() == 3);
  CHECK(times.measure_error(10).count() == 0);  // nothing was interpolated
}

TEST_CASE("simulated times: a step's host-bound time is its ranks' mean, read off the grid as its time is",
          "[evaluation][grid]") {
  // tiny-gpt's short steps on dgx-a100's host: launch-bound, so the host-bound time is sizable.
  steps::StepSimulator simulator(load_model("tiny-gpt"), hw::load_cluster("dgx-a100"));
  evaluation::SimulatedTimes grid(simulator, kDegree, 1, 1.05);
  const Plan plan = uniform_plan(megatron_ts(), 2);
  const sim::SimulationResult direct =
      simulator.simulate(plan, {.tokens = 7 * kQuantum, .degree = kDegree, .batch = 1});
  double mean = 0;
  for (const sim::RankResult& rank : direct.per_rank) mean += rank.host_bound_s / kDegree;
  REQUIRE(mean > 0.1 * direct.iteration_time_s);
  CHECK(grid.time(plan, 7 * kQuantum).host_bound_s == Approx(mean).epsilon(1e-9));
  // Between two grid lengths (round(64·1.05^9) and round(64·1.05^10) quanta), the line between their
  // host-bound times.
  const int64_t low = 99 * kQuantum, high = 104 * kQuantum, between = 101 * kQuantum;
  const double low_s = grid.time(plan, low).host_bound_s, high_s = grid.time(plan, high).host_bound_s;
  CHECK(grid.time(plan, between).host_bound_s == Approx(low_s + (high_s - low_s) * 2 / 5).epsilon(1e-9));
}

TEST_CASE("simulated times: interpolation on a 5 % grid stays within 1 % of direct simulation",
          "[evaluation][grid]") {
  steps::StepSimulator simulator(load_model("tiny-gpt"), hw::load_cluster("dgx-a100"));
  const Plan plan = uniform_plan(megatron_cz(), 2);
  evaluation::SimulatedTimes grid(simulator, kDegree, 1, 1.05);
  evaluation::SimulatedTimes exact(simulator, kDegree, 1, 0);

  // 150 distinct padded lengths from 128 to ~2,400 quanta (2K to 38K tokens).
  std::set<int64_t> lengths;
  for (int i = 0; i < 150; ++i) lengths.insert(kQuantum * (128 + 15 * i + (i * i) % 7));
  double worst_pct = 0;
  for (int64_t tokens : lengths) {
    const double interpolated = grid.seconds(plan, tokens), direct = exact.seconds(plan, tokens);
    const double pct = 100 * std::abs(interpolated - direct) / direct;
    INFO(tokens << " tokens: interpolated " << interpolated << " s, simulated " << direct << " s");
    // Kernel and collective times are piecewise linear in size, so the step time has kinks that a line
    // across 5 % of length can cut: up to ~0.6 % on this small model (0.02 % on gpt-8l).
    CHECK(pct < 1);
    worst_pct = std::max(worst_pct, pct);
  }
  CHECK(exact.simulations() == static_cast<int64_t>(lengths.size()));
  // Grid lengths 5 % apart over a ×19 range: log(19)/log(1.05) ≈ 60 of them, plus one either side.
  CHECK(grid.simulations() <= 62);

  // The error the grid reports is measured on lengths it interpolated: never above the worst seen here.
  const PercentageErrors reported = grid.measure_error(24);
  CHECK(reported.count() == 24);
  CHECK(reported.max_pct() <= worst_pct + 1e-12);
  CHECK(reported.mean_pct() <= reported.max_pct());
}

}  // namespace paradyse::testing
