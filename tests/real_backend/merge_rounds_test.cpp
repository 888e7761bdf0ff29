// real_backend/real_run.cpp's merge_rounds: validate's rounds of one request as one measurement.
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

TEST_CASE("merge_rounds: rounds of different lengths are refused", "[real]") {
  RunReport other = round_of({1.0}, 0.1, 0.1, 5, 1.0);
  other.lengths[0].seq = 1024;
  CHECK_THROWS_AS(real::merge_rounds({round_of({1.0}, 0.1, 0.1, 5, 1.0), other}), InternalError);
  CHECK_THROWS_AS(real::merge_rounds({}), InternalError);
}

}  // namespace
}  // namespace paradyse::testing
