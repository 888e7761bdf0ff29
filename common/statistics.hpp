// Summaries of repeated measurements.
#pragma once

#include <algorithm>
#include <cmath>
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

}  // namespace paradyse
