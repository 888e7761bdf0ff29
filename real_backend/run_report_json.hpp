// The JSON of a real run, as `paradyse run --json` prints it: per length, the median and every
// measured step in seconds, tokens per second at the median, peak memory, saved activations, the loss
// and rank 0's per-layer times. The timed ops are left out: `run --ops` writes them as CSV.
#pragma once

#include <nlohmann/json.hpp>

#include "real_backend/real_run.hpp"

namespace paradyse::real {

inline void to_json(nlohmann::json& j, const LengthMeasurement& m) {
  j = {{"seq", m.seq},
       {"median_step_s", m.median_step_s},
       {"step_s", m.step_s},
       {"tokens_per_s", static_cast<double>(m.seq) / m.median_step_s},
       {"peak_memory_bytes", m.peak_bytes},
       {"process_peak_bytes", m.process_peak_bytes},
       {"reserved_peak_bytes", m.reserved_peak_bytes},
       {"saved_bytes_per_layer", m.saved_bytes_per_layer},
       {"loss_per_token", m.loss_per_token},
       {"layer_forward_s", m.layer_forward_s},
       {"layer_backward_s", m.layer_backward_s}};
}

inline void to_json(nlohmann::json& j, const RunReport& report) {
  j = {{"ranks", report.ranks}, {"communicator", report.communicator}, {"lengths", report.lengths}};
}

}  // namespace paradyse::real
