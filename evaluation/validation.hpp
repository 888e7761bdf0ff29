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
  int64_t documents = 1;  // packed in the sequence (--docs)
  double measured_s = 0, simulated_s = 0, time_error = 0;
  int measured_steps = 0;  // measured_s is their median
  // Rounds the row ran, and those whose steps it kept: at the calibration's speed (real::SpeedMatch).
  // 0 kept: none was, and the steps are every round's.
  int rounds_run = 1, rounds_kept = 1;
  double measured_peak_bytes = 0, simulated_peak_bytes = 0, memory_error = 0;
  // What the process's allocator handed out at most (the CUDA caching allocator's on a GPU),
  // temporaries inside ops included, and the simulated peak's error against it.
  double allocator_peak_bytes = 0, allocator_memory_error = 0;
  // The machine's speed while the row ran against its speed when calibrated: the reference's time
  // around the row (the mean of before and after) over its time in the calibration; 1.2: the machine
  // ran 20 % slower. 0 when either was not measured.
  double reference_ratio = 0;
  // time_error with the measured time brought back to the calibration's speed (divided by
  // reference_ratio): the model's error apart from the machine's drift. time_error without a ratio.
  double time_error_at_calibration_speed = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ValidationRow, plan, seq, documents, measured_s, measured_steps,
                                   rounds_run, rounds_kept, simulated_s, time_error, measured_peak_bytes,
                                   simulated_peak_bytes, memory_error, allocator_peak_bytes,
                                   allocator_memory_error, reference_ratio, time_error_at_calibration_speed)

// Where rank 0's step time goes, by backend call (Kernel's name; collectives by their kind): measured
// in the last measured step, and priced by the cost model op by op (dispatch and device time). Op by
// op, not scheduled: a measured wait is time the rank spent on its peers or the network, which the
// model prices as 0; a collective is measured to its launch and modelled to its end.
struct KernelTimeRow {
  std::string plan;
  int64_t seq = 0;
  std::string kernel;
  int calls = 0;
  double measured_s = 0, modelled_s = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KernelTimeRow, plan, seq, kernel, calls, measured_s, modelled_s)

// reports[i] measured requests[i] (with profile_ops) on `ranks` ranks; rows by plan, length and
// kernel, most measured time first.
std::vector<KernelTimeRow> kernel_times(const std::vector<real::RunRequest>& requests,
                                        const std::vector<real::RunReport>& reports, const ModelSpec& model,
                                        const hw::ClusterSpec& cluster, int ranks);

// reports[i] measured requests[i] on `ranks` ranks; every length of every report is simulated.
std::vector<ValidationRow> simulate_measurements(const std::vector<real::RunRequest>& requests,
                                                 const std::vector<real::RunReport>& reports,
                                                 const ModelSpec& model, const hw::ClusterSpec& cluster,
                                                 int ranks);

}  // namespace paradyse::evaluation
