#include "selector/policy.hpp"

#include "common/errors.hpp"
#include "selector/optimal_policy.hpp"
#include "selector/paradyse_policy.hpp"
#include "selector/static_policy.hpp"

namespace paradyse::selector {

using steps::CostTable;

Decision priced_decision(const std::string& policy, const CostTable& table, const CostTable::Choice& choice) {
  Decision decision;
  decision.policy = policy;
  decision.tokens = table.tokens;
  decision.padded_tokens = table.padded_tokens;
  decision.plan = table.plan(choice);
  decision.predicted_s = table.plan_s(choice);
  decision.predicted_peak_bytes = table.plan_peak_bytes(choice);
  decision.fits = decision.predicted_peak_bytes <= table.step.capacity_bytes;
  for (std::size_t l = 1; l < choice.size(); ++l) decision.switches += choice[l] != choice[l - 1] ? 1 : 0;
  return decision;
}

CostTable::Choice uniform_choice(const CostTable& table, int index) {
  return CostTable::Choice(static_cast<std::size_t>(table.num_layers), index);
}

int leanest_candidate(const CostTable& table) {
  int leanest = -1;
  double lowest = 0;
  for (int c = 0; c < static_cast<int>(table.candidates.size()); ++c) {
    const double peak = table.plan_peak_bytes(uniform_choice(table, c));
    if (leanest < 0 || peak < lowest) {
      leanest = c;
      lowest = peak;
    }
  }
  return leanest;
}

std::unique_ptr<Policy> make_policy(const std::string& spec, CostSource& source,
                                    const ParadyseOptions& paradyse, const OptimalOptions& optimal) {
  if (spec == "paradyse" || spec == "paradyse-2d") {
    if (!(paradyse.gamma >= 0 && paradyse.gamma < 1))
      throw InputError("--gamma", 0, "",
                       "expected a fraction in [0, 1), got " + std::to_string(paradyse.gamma));
    ParadyseOptions options = paradyse;
    options.two_d = spec == "paradyse-2d";
    return std::make_unique<ParadysePolicy>(source, options);
  }
  if (spec == "optimal" || spec == "optimal-2d") {
    OptimalOptions options = optimal;
    options.two_d = spec == "optimal-2d";
    return std::make_unique<OptimalPolicy>(source, options);
  }
  if (const std::optional<StaticSpec> fixed = parse_static_policy(spec))
    return std::make_unique<StaticPolicy>(*fixed, source);
  throw InputError("--policy", 0, "",
                   "expected static:NAME[:selective|:full|:offload], paradyse, optimal, paradyse-2d or "
                   "optimal-2d, got '" +
                       spec + "'");
}

std::vector<std::string> default_policy_names(bool two_d) {
  std::vector<std::string> names;
  for (const Strategy* strategy : candidate_strategies(two_d))
    names.push_back("static:" + std::string(strategy->name()));
  names.emplace_back("paradyse");
  names.emplace_back("optimal");
  if (two_d) {
    names.emplace_back("paradyse-2d");
    names.emplace_back("optimal-2d");
  }
  return names;
}

}  // namespace paradyse::selector
