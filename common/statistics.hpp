// Summaries of repeated measurements.
#pragma once

#include <algorithm>
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

}  // namespace paradyse
