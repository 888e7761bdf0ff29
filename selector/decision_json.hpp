// The JSON of a decision, as `paradyse plan --json` prints it: lengths as "seq" and "padded_seq", the
// plan as one name per layer, the prediction and how the decision was reached.
#pragma once

#include <nlohmann/json.hpp>

#include "selector/policy.hpp"

namespace paradyse::selector {

inline void to_json(nlohmann::json& j, const Decision& d) {
  nlohmann::json plan = nlohmann::json::array();
  for (const LayerChoice& layer : d.plan) plan.push_back(plan_name({layer}));
  j = {{"policy", d.policy},
       {"seq", d.tokens},
       {"padded_seq", d.padded_tokens},
       {"plan", std::move(plan)},
       {"predicted_time_s", d.predicted_s},
       {"predicted_peak_bytes", d.predicted_peak_bytes},
       {"fits", d.fits},
       {"switches", d.switches},
       {"fallback", d.fallback},
       {"kept_previous", d.kept_previous},
       {"from_cache", d.from_cache},
       {"evaluated_plans", d.evaluated_plans}};
}

}  // namespace paradyse::selector
