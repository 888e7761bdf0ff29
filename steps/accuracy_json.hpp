// The JSON of an accuracy report, as `paradyse costmodel eval --json` prints it: per model, inside and
// outside the profiled lengths, the points compared and the mean and max absolute percentage error of
// time and of memory (null where no point was compared).
#pragma once

#include <nlohmann/json.hpp>

#include "steps/accuracy.hpp"

namespace paradyse::steps {

// Not a to_json of PercentageErrors: other reports name the same numbers otherwise (compare's
// interpolation error).
inline nlohmann::json absolute_percentage_errors_json(const PercentageErrors& errors) {
  if (errors.count() == 0) return nullptr;
  return {{"mean_ape_pct", errors.mean_pct()}, {"max_ape_pct", errors.max_pct()}};
}

inline void to_json(nlohmann::json& j, const TimeAndMemoryErrors& errors) {
  j = {{"points", errors.time.count()},
       {"time", absolute_percentage_errors_json(errors.time)},
       {"memory", absolute_percentage_errors_json(errors.memory)}};
}

inline void to_json(nlohmann::json& j, const ModelAccuracy& accuracy) {
  j = {{"inside", accuracy.inside}, {"outside", accuracy.outside}};
}

inline void to_json(nlohmann::json& j, const AccuracyReport& report) {
  j = {{"points", report.points}, {"learned", report.learned}, {"analytic", report.analytic}};
}

}  // namespace paradyse::steps
