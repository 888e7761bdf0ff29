#include "selector/static_policy.hpp"

#include "common/errors.hpp"

namespace paradyse::selector {

StaticPolicy::StaticPolicy(const Strategy& strategy, CostSource& source)
    : strategy_(strategy), source_(source), name_("static:" + std::string(strategy.name())) {}

Decision StaticPolicy::decide(int64_t tokens) {
  const costmodel::CostTable table = source_.table(tokens, {{&strategy_, Recompute::none}});
  const auto index = table.find(strategy_);
  if (!index)
    throw InputError("--policy", 0, "",
                     name_ + ": the cost model (" + source_.name() + ") cannot price " +
                         std::string(strategy_.name()) + " here");
  Decision decision = priced_decision(name_, table, uniform_choice(table, *index));
  decision.evaluated_plans = 1;
  return decision;
}

}  // namespace paradyse::selector
