// The JSON of a simulation result, as `paradyse simulate --json` prints it: lengths as "seq" and
// "padded_seq", the first out of memory (when there is one) under "oom_at", each rank's breakdown,
// and the count of simulated activities. The recorded programs and timeline are left out:
// sim/timeline_json.hpp writes those.
#pragma once

#include <nlohmann/json.hpp>

#include "sim/simulator.hpp"

namespace paradyse::sim {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankResult, compute_s, exposed_comm_s, host_bound_s, idle_s,
                                   peak_memory_bytes)

inline void to_json(nlohmann::json& j, const OutOfMemory& oom) {
  j = {{"rank", oom.rank},   {"phase", to_string(oom.phase)}, {"layer", oom.layer}, {"op", oom.op},
       {"bytes", oom.bytes}, {"capacity_bytes", oom.capacity}};
}

inline void to_json(nlohmann::json& j, const SimulationResult& r) {
  j = {{"plan", r.plan},
       {"seq", r.tokens},
       {"padded_seq", r.padded_tokens},
       {"documents", r.documents},
       {"degree", r.degree},
       {"batch", r.batch},
       {"micro_batches", r.micro_batches},
       {"iteration_time_s", r.iteration_time_s},
       {"peak_memory_bytes", r.peak_memory_bytes},
       {"host_peak_bytes", r.host_peak_bytes},
       {"capacity_bytes", r.capacity_bytes},
       {"oom", r.oom},
       {"per_rank", r.per_rank},
       {"events", r.events()},
       {"kernels", r.kernels},
       {"flows", r.flows},
       {"analytic_collectives", r.analytic_collectives}};
  if (r.oom_at) j["oom_at"] = *r.oom_at;
}

}  // namespace paradyse::sim
