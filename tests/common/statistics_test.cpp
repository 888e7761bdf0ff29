#include "common/statistics.hpp"

#include <catch2/catch.hpp>
#include <cmath>

using namespace paradyse;

TEST_CASE("average ranks share tied places", "[common]") {
  CHECK(average_ranks({30, 10, 20}) == std::vector<double>{3, 1, 2});
  CHECK(average_ranks({7.7, 7.2, 7.7, 7.7, 7.2}) == std::vector<double>{4, 1.5, 4, 4, 1.5});
}

TEST_CASE("Spearman's rho: the textbook 1 − 6·Σd²/(n(n²−1)) without ties, Pearson of ranks with them",
          "[common]") {
  // Rank differences (1, −1, 1, −1, 0): Σd² = 4, n = 5: 1 − 24/120.
  CHECK(spearman({1, 2, 3, 4, 5}, {20, 10, 40, 30, 50}) == Approx(0.8));
  CHECK(spearman({1, 2, 3}, {9, 5, 1}) == Approx(-1));
  // Ranks (1, 2, 3, 4) against (1, 2.5, 2.5, 4): covariance 4.5, variances 5 and 4.5.
  CHECK(spearman({1, 2, 3, 4}, {1, 2, 2, 3}) == Approx(4.5 / std::sqrt(5 * 4.5)));
  CHECK(std::isnan(spearman({1, 2, 3}, {4, 4, 4})));
}

TEST_CASE("median_curve: the median y at each x that every curve measured", "[common]") {
  // Three passes of a curve; the second stopped a point early, the third skipped x = 2.
  const MeasuredCurve curve = median_curve(
      {{{1, 10}, {2, 30}, {4, 50}, {8, 70}}, {{1, 20}, {2, 10}, {4, 60}}, {{1, 90}, {4, 40}, {8, 1}}});
  CHECK(curve == MeasuredCurve{{1, 20}, {4, 50}});
  CHECK(median_curve({{{1, 3}, {2, 4}}}) == MeasuredCurve{{1, 3}, {2, 4}});
  CHECK_THROWS_AS(median_curve({}), InternalError);
}
