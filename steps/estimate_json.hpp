// The JSON of an estimate, as `paradyse estimate --json` prints it: lengths as "seq" and "padded_seq"
// like the other commands, the times in seconds under "time_s", bytes per rank under "memory_bytes".
#pragma once

#include <nlohmann/json.hpp>

#include "steps/estimate.hpp"

namespace paradyse::steps {

// The keys leave out the fields' "_bytes": they sit under "memory_bytes".
inline void to_json(nlohmann::json& j, const MemoryBreakdown& memory) {
  j = {{"peak", memory.peak_bytes},
       {"capacity", memory.capacity_bytes},
       {"weights", memory.weights_bytes},
       {"gradients", memory.gradients_bytes},
       {"optimizer_states", memory.optimizer_states_bytes},
       {"saved_activations", memory.saved_activations_bytes},
       {"transient", memory.transient_bytes},
       {"fragmentation", memory.fragmentation_bytes},
       {"offloaded", memory.offloaded_bytes},
       {"host_capacity", memory.host_capacity_bytes}};
}

// The keys leave out the fields' "_s": they sit under "time_s".
inline void to_json(nlohmann::json& j, const TimeBreakdown& time) {
  j = {{"total", time.total_s},          {"forward", time.forward_s},
       {"backward", time.backward_s},    {"optimizer", time.optimizer_s},
       {"compute", time.compute_s},      {"exposed_communication", time.exposed_communication_s},
       {"host_bound", time.host_bound_s}};
}

inline void to_json(nlohmann::json& j, const Estimate& e) {
  j = {{"plan", e.plan},
       {"seq", e.tokens},
       {"padded_seq", e.padded_tokens},
       {"documents", e.documents},
       {"degree", e.degree},
       {"batch", e.batch},
       {"micro_batches", e.micro_batches},
       {"time_s", e.time},
       {"memory_bytes", e.memory},
       {"fits", e.fits},
       {"flops", e.flops},
       {"model_flops", e.model_flops},
       {"mfu", e.mfu},
       {"comm_bytes", e.comm_bytes}};
}

}  // namespace paradyse::steps
