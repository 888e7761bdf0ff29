// real_backend/real_run.cpp's merge_rounds: validate's rounds of one request as one measurement, and
// the machine's speed they are kept at (SpeedMatch); calibrate's samples at speed (passes_at_speed) and
// its efficiency curves (efficiency_of_peak).
#include "common/limits.hpp"
#include "real_backend/calibration.hpp"
#include "real_backend/real_run.hpp"

#include "tests/real_backend/catch_after_torch.hpp"  // last: after LibTorch

namespace paradyse::testing {
namespace {

using real::LengthMeasurement;
using real::RunReport;

RunReport round_of(std::vector<double> step_s, double reference_before_s, double reference_after_s,
                   int64_t peak_bytes, double loss_per_token) {
  LengthMeasurement m;
  m.seq = 512;
  m.step_s = std::move(step_s);
  m.median_step_s = m.step_s.front();
  m.reference_before_s = reference_before_s;
  m.reference_after_s = reference_after_s;
  m.peak_bytes = peak_bytes;
  m.process_peak_bytes = 2 * peak_bytes;
  m.loss_per_token = loss_per_token;
  RunReport report;
  report.communicator = "gloo";
  report.ranks = 2;
  report.lengths.push_back(std::move(m));
  return report;
}

TEST_CASE("merge_rounds: the median over every round's steps, not the rounds' medians", "[real]") {
  // Medians of the rounds: 1.0, 3.0, 5.0 (median 3.0); of all seven steps: 2.0.
  const RunReport merged = real::merge_rounds({round_of({1.0, 1.0, 1.5}, 0.10, 0.12, 100, 7.0),
                                               round_of({3.0}, 0.20, 0.22, 300, 7.0),
                                               round_of({2.0, 5.0, 9.0}, 0.30, 0.32, 200, 6.5)});
  REQUIRE(merged.lengths.size() == 1);
  const LengthMeasurement& m = merged.lengths[0];
  CHECK(m.step_s.size() == 7);
  CHECK(m.median_step_s == 2.0);
  CHECK(m.reference_before_s == 0.20);
  CHECK(m.reference_after_s == 0.22);
  CHECK(m.peak_bytes == 300);  // the largest round's
  CHECK(m.process_peak_bytes == 600);
  CHECK(m.loss_per_token == 6.5);  // the last round's
  CHECK(merged.ranks == 2);
}

TEST_CASE("merge_rounds: one round is itself", "[real]") {
  const RunReport merged = real::merge_rounds({round_of({0.4, 0.2, 0.3}, 0.1, 0.1, 5, 1.0)});
  CHECK(merged.lengths[0].median_step_s == 0.3);
  CHECK(merged.lengths[0].step_s == std::vector<double>{0.4, 0.2, 0.3});
}

TEST_CASE("merge_rounds: with a speed to match, only the rounds at that speed count", "[real]") {
  // The calibration's reference took 0.10 s; the second round ran in a slow spell (0.18 s after it).
  const real::SpeedMatch match{0.10, 0.10};
  const std::vector<RunReport> rounds{round_of({1.0}, 0.100, 0.105, 100, 7.0),
                                      round_of({1.8}, 0.104, 0.180, 300, 7.0),
                                      round_of({1.1, 1.2}, 0.095, 0.091, 200, 6.5)};
  const LengthMeasurement m = real::merge_rounds(rounds, match).lengths[0];
  CHECK(m.step_s == std::vector<double>{1.0, 1.1, 1.2});
  CHECK(m.median_step_s == 1.1);
  CHECK(m.rounds_run == 3);
  CHECK(m.rounds_kept == 2);
  CHECK(m.reference_after_s == Approx((0.105 + 0.091) / 2));  // the kept rounds' median
  CHECK(m.peak_bytes == 300);                                 // memory does not depend on speed
  // The base round gives the loss: the first here.
  CHECK(real::merge_rounds(rounds, match, 0).lengths[0].loss_per_token == 7.0);
  // Within 10 % on either side; a reference not measured (0) is not at speed.
  CHECK(match.at_speed(rounds[0].lengths[0]));
  CHECK_FALSE(match.at_speed(rounds[1].lengths[0]));
  CHECK_FALSE(match.at_speed(round_of({1.0}, 0.0, 0.1, 1, 1.0).lengths[0]));
  CHECK_FALSE(match.at_speed(round_of({1.0}, 0.1, 0.089, 1, 1.0).lengths[0]));
  CHECK(real::SpeedMatch{}.at_speed(rounds[1].lengths[0]));  // nothing to match: every round
}

TEST_CASE("merge_rounds: no round at speed keeps every round and says so", "[real]") {
  const real::SpeedMatch match{0.05, 0.10};
  const LengthMeasurement m =
      real::merge_rounds({round_of({1.0}, 0.10, 0.10, 1, 1.0), round_of({3.0}, 0.10, 0.10, 1, 1.0)}, match)
          .lengths[0];
  CHECK(m.rounds_kept == 0);
  CHECK(m.rounds_run == 2);
  CHECK(m.median_step_s == 2.0);
}

TEST_CASE("passes_at_speed: a group counts when the references around it are at the machine's own speed",
          "[real]") {
  // Four references around three groups per pass; the machine fell into a 1.8x slow spell during
  // the first pass and came out of it during the second. Its own speed: the speed it ran at most,
  // the median of the eight timings within 10 % of one another (0.083 .. 0.090): 0.0855 s.
  const std::vector<std::vector<double>> reference_s{
      {0.084, 0.088, 0.153, 0.154}, {0.150, 0.151, 0.087, 0.083}, {0.083, 0.085, 0.086, 0.090}};
  CHECK(real::own_speed_s(reference_s, 0.10) == Approx(0.0855));
  const std::vector<std::vector<int>> kept = real::passes_at_speed(reference_s, 0.10);
  REQUIRE(kept.size() == 3);
  CHECK(kept[0] == std::vector<int>{0, 2});
  CHECK(kept[1] == std::vector<int>{2});
  CHECK(kept[2] == std::vector<int>{1, 2});
  // One timing that ran fast is not the machine's speed: against 0.079 alone, 0.087–0.089 would be
  // more than 10 % slower; against the median of the set around them (0.087), they are at speed.
  const std::vector<std::vector<double>> one_fast{{0.079, 0.087, 0.089, 0.088}, {0.086, 0.150, 0.152, 0.087}};
  CHECK(real::own_speed_s(one_fast, 0.10) == Approx(0.087));
  CHECK(real::passes_at_speed(one_fast, 0.10) == std::vector<std::vector<int>>{{0}, {0}, {0}});
  // A machine in its slow mode most of the time is described at that speed; a group whose references
  // straddle the modes (the machine moved while measuring it) counts at neither.
  const std::vector<std::vector<double>> mostly_slow{{0.150, 0.152, 0.089, 0.151},
                                                     {0.149, 0.155, 0.153, 0.150}};
  CHECK(real::own_speed_s(mostly_slow, 0.10) == Approx(0.151));
  CHECK(real::passes_at_speed(mostly_slow, 0.10) == std::vector<std::vector<int>>{{0, 1}, {1}, {1}});
  CHECK_THROWS_AS(real::passes_at_speed({}, 0.10), InternalError);
  CHECK_THROWS_AS(real::passes_at_speed({{0.1, 0.1}, {0.1}}, 0.10), InternalError);
}

TEST_CASE("merge_rounds: rounds of different lengths are refused", "[real]") {
  RunReport other = round_of({1.0}, 0.1, 0.1, 5, 1.0);
  other.lengths[0].seq = 1024;
  CHECK_THROWS_AS(real::merge_rounds({round_of({1.0}, 0.1, 0.1, 5, 1.0), other}), InternalError);
  CHECK_THROWS_AS(real::merge_rounds({}), InternalError);
}

}  // namespace
TEST_CASE("efficiency_of_peak: a point timed below a thousandth of the peak is written at it, and named",
          "[real]") {
  // A busy machine's calibration (seen on a 2-core VM): the smallest GEMM's median came out at 0.015 %
  // of the peak, where a quiet run gives 3.1 %.
  const MeasuredCurve gemm{{524288, 1.2e8}, {4194304, 2.4e11}, {268435456, 8.1e11}};
  std::vector<std::string> raised;
  const MeasuredCurve fractions = real::efficiency_of_peak(gemm, 8.1e11, "GEMM of FLOPs", raised);
  REQUIRE(fractions.size() == 3);
  CHECK(fractions[0] == std::pair<double, double>{524288, kLowestEfficiency});
  CHECK(fractions[1].second == Approx(2.4e11 / 8.1e11));
  CHECK(fractions[2].second == 1.0);
  REQUIRE(raised.size() == 1);
  CHECK(raised[0] == "GEMM of FLOPs 524288 at 0.015 %");
  // Attention computed in float32 may outrun the bf16 GEMMs' peak: at most 1.
  CHECK(real::efficiency_of_peak({{4096, 9e11}}, 8.1e11, "attention of tokens", raised)[0].second == 1.0);
  CHECK(raised.size() == 1);
}

}  // namespace paradyse::testing
