// Summaries of repeated measurements.
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "common/errors.hpp"

namespace paradyse {

// The middle value; the mean of the two middle ones for an even count.
inline double median(std::vector<double> values) {
  PARADYSE_CHECK(!values.empty(), "median of nothing");
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

// Curves measured more than once, as [x, y] points: the median y at each x that every curve has, in
// the first curve's order (a curve that stops early, or skips an x, drops that x).
using MeasuredCurve = std::vector<std::pair<double, double>>;
inline MeasuredCurve median_curve(const std::vector<MeasuredCurve>& curves) {
  PARADYSE_CHECK(!curves.empty(), "median of no curves");
  MeasuredCurve medians;
  for (const auto& [x, y] : curves.front()) {
    std::vector<double> ys;
    for (const MeasuredCurve& curve : curves) {
      const auto at =
          std::find_if(curve.begin(), curve.end(), [x = x](const auto& p) { return p.first == x; });
      if (at != curve.end()) ys.push_back(at->second);
    }
    if (ys.size() == curves.size()) medians.emplace_back(x, median(std::move(ys)));
  }
  return medians;
}

// Absolute percentage errors of predictions against references (cost models against profiles, an
// interpolation against direct simulations, the simulator against real runs): count, mean, maximum.
class PercentageErrors {
 public:
  // Adds 100·|predicted − reference| / reference; the reference must be positive.
  void add(double predicted, double reference) {
    PARADYSE_CHECK(reference > 0, "a percentage error against a reference that is not positive");
    const double pct = 100 * std::abs(predicted - reference) / reference;
    sum_pct_ += pct;
    max_pct_ = std::max(max_pct_, pct);
    ++count_;
  }
  int count() const { return count_; }
  double mean_pct() const { return count_ == 0 ? 0 : sum_pct_ / count_; }
  double max_pct() const { return max_pct_; }

 private:
  int count_ = 0;
  double sum_pct_ = 0;
  double max_pct_ = 0;
};

// Ranks from 1 in ascending order, tied values sharing the mean of their ranks.
inline std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && values[order[j]] == values[order[i]]) ++j;
    for (std::size_t k = i; k < j; ++k) ranks[order[k]] = static_cast<double>(i + j + 1) / 2;
    i = j;
  }
  return ranks;
}

// Spearman's rank correlation: the Pearson correlation of the average ranks, in [−1, 1]; NaN when
// either side has fewer than two distinct values (no order to agree with).
inline double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  PARADYSE_CHECK(a.size() == b.size(), "rank correlation of series of different lengths");
  const std::vector<double> ra = average_ranks(a), rb = average_ranks(b);
  const double n = static_cast<double>(a.size());
  double mean_a = 0, mean_b = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    mean_a += ra[i] / n;
    mean_b += rb[i] / n;
  }
  double cov = 0, var_a = 0, var_b = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - mean_a) * (rb[i] - mean_b);
    var_a += (ra[i] - mean_a) * (ra[i] - mean_a);
    var_b += (rb[i] - mean_b) * (rb[i] - mean_b);
  }
  if (var_a == 0 || var_b == 0) return std::nan("");
  return cov / std::sqrt(var_a * var_b);
}

}  // namespace paradyse
