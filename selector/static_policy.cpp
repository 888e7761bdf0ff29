#include "selector/static_policy.hpp"

#include "common/errors.hpp"

namespace paradyse::selector {

StaticPolicy::StaticPolicy(const Strategy& strategy, CostSource& source)
    : strategy_(strategy), source_(source), name_("static:" + std::string(strategy.name())) {
  if (!source_.prices({&strategy_, Recompute::none}))
    throw InputError(
        "--policy", 0, "",
        name_ + ": the cost model (" + source_.name() + ") cannot price " + std::string(strategy_.name()));
}

Decision StaticPolicy::decide(const MicroBatch& micro_batch) {
  const steps::CostTable table = source_.table(micro_batch, {{&strategy_, Recompute::none}});
  const auto index = table.find(strategy_);
  if (!index) {  // the strategy would need a tensor no GPU holds at this length: out of memory
    Decision nothing;
    nothing.policy = name_;
    nothing.tokens = micro_batch.tokens();
    nothing.padded_tokens = table.padded_tokens;
    nothing.evaluated_plans = 1;
    return nothing;
  }
  Decision decision = priced_decision(name_, table, uniform_choice(table, *index));
  decision.evaluated_plans = 1;
  return decision;
}

}  // namespace paradyse::selector
