// The JSON of an estimate, as `paradyse estimate --json` prints it: lengths as "seq" and "padded_seq"
// like the other commands, the times in seconds under "time_s", bytes per rank under "memory_bytes".
#pragma once

#include <nlohmann/json.hpp>

#include "costmodel/estimate.hpp"

namespace paradyse::costmodel {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MemoryBreakdown, peak, capacity, weights, gradients, optimizer_states,
                                   saved_activations, transient, fragmentation)

// The keys leave out the fields' "_seconds": they sit under "time_s".
inline void to_json(nlohmann::json& j, const TimeBreakdown& time) {
  j = {{"total", time.total_seconds},       {"forward", time.forward_seconds},
       {"backward", time.backward_seconds}, {"optimizer", time.optimizer_seconds},
       {"compute", time.compute_seconds},   {"exposed_communication", time.exposed_communication_seconds}};
}

inline void to_json(nlohmann::json& j, const Estimate& e) {
  j = {{"plan", e.plan},
       {"seq", e.tokens},
       {"padded_seq", e.padded_tokens},
       {"degree", e.degree},
       {"batch", e.batch},
       {"time_s", e.time},
       {"memory_bytes", e.memory},
       {"fits", e.fits},
       {"flops", e.flops},
       {"model_flops", e.model_flops},
       {"mfu", e.mfu},
       {"comm_bytes", e.comm_bytes}};
}

}  // namespace paradyse::costmodel
