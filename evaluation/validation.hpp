// The simulator against real runs (`paradyse validate`): each measured (plan, length) simulated on
// the calibrated model of the machine it ran on, with the relative errors of step time and peak
// memory. Real runs validate the model; they never fit it (constants come from `paradyse calibrate`'s
// component measurements).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw_models/cluster.hpp"
#include "real_backend/real_run.hpp"

namespace paradyse::evaluation {

// One plan at one length: measured against simulated, each error relative to the measurement.
struct ValidationRow {
  std::string plan;
  int64_t seq = 0;
  double measured_s = 0, simulated_s = 0, time_error = 0;
  double measured_peak_bytes = 0, simulated_peak_bytes = 0, memory_error = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ValidationRow, plan, seq, measured_s, simulated_s, time_error,
                                   measured_peak_bytes, simulated_peak_bytes, memory_error)

// reports[i] measured requests[i] on `ranks` ranks; every length of every report is simulated.
std::vector<ValidationRow> simulate_measurements(const std::vector<real::RunRequest>& requests,
                                                 const std::vector<real::RunReport>& reports,
                                                 const ModelSpec& model, const hw::ClusterSpec& cluster,
                                                 int ranks);

}  // namespace paradyse::evaluation
