#include "selector/policy.hpp"

#include "common/errors.hpp"
#include "selector/optimal_policy.hpp"
#include "selector/paradyse_policy.hpp"
#include "selector/static_policy.hpp"

namespace paradyse::selector {

using costmodel::CostTable;

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
  if (spec == "paradyse") {
    if (!(paradyse.gamma >= 0 && paradyse.gamma < 1))
      throw InputError("--gamma", 0, "",
                       "expected a fraction in [0, 1), got " + std::to_string(paradyse.gamma));
    return std::make_unique<ParadysePolicy>(source, paradyse);
  }
  if (spec == "optimal") return std::make_unique<OptimalPolicy>(source, optimal);
  if (spec.starts_with("static:")) {
    if (const Strategy* strategy = find_strategy(spec.substr(7)))
      return std::make_unique<StaticPolicy>(*strategy, source);
    throw InputError(
        "--policy", 0, "",
        "unknown strategy '" + spec.substr(7) + "' in '" + spec + "'; expected one of: " + strategy_names());
  }
  throw InputError("--policy", 0, "", "expected static:NAME, paradyse or optimal, got '" + spec + "'");
}

std::vector<std::string> default_policy_names() {
  std::vector<std::string> names;
  for (const Strategy* strategy : paper_strategies())
    names.push_back("static:" + std::string(strategy->name()));
  names.emplace_back("paradyse");
  names.emplace_back("optimal");
  return names;
}

}  // namespace paradyse::selector
