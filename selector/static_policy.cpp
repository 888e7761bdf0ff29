#include "selector/static_policy.hpp"

#include <algorithm>

#include "common/errors.hpp"
#include "program/tensor.hpp"

namespace paradyse::selector {

std::optional<StaticSpec> parse_static_policy(const std::string& name) {
  constexpr std::string_view kPrefix = "static:";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  const std::string rest = name.substr(kPrefix.size());
  const std::size_t colon = rest.find(':');
  const std::string strategy_name = rest.substr(0, colon);
  StaticSpec spec;
  spec.strategy = find_strategy(strategy_name);
  if (spec.strategy == nullptr)
    throw InputError(
        "--policy", 0, "",
        "unknown strategy '" + strategy_name + "' in '" + name + "'; expected one of: " + strategy_names());
  if (colon == std::string::npos) return spec;
  std::string recompute = rest.substr(colon + 1);
  if (const std::size_t count = recompute.find(':'); count != std::string::npos) {
    const std::string layers = recompute.substr(count + 1);
    recompute.resize(count);
    const bool digits =
        !layers.empty() && layers.size() <= 6 &&
        std::all_of(layers.begin(), layers.end(), [](char c) { return c >= '0' && c <= '9'; });
    spec.offloaded_layers = digits ? std::stoi(layers) : 0;
    if (recompute != "offload" || spec.offloaded_layers < 1)
      throw InputError(
          "--policy", 0, "",
          "expected static:NAME:offload:K with K a positive count of layers to offload, got '" + name + "'");
  }
  const std::optional<Recompute> parsed = parse_recompute(recompute);
  if (!parsed || *parsed == Recompute::none)
    throw InputError("--policy", 0, "",
                     "expected static:NAME or static:NAME:selective, :full or :offload, got '" + name + "'");
  if (spec.strategy->always_recomputes() && *parsed != Recompute::offload)
    throw InputError("--policy", 0, "",
                     strategy_name + " recomputes its layers whatever the plan says: expected static:" +
                         strategy_name + " or static:" + strategy_name + ":offload, got '" + name + "'");
  spec.recompute = *parsed;
  return spec;
}

std::string static_policy_name(const StaticSpec& spec) {
  std::string name = "static:" + std::string(spec.strategy->name());
  if (spec.recompute != Recompute::none) name += ":" + std::string(to_string(spec.recompute));
  if (spec.offloaded_layers > 0) name += ":" + std::to_string(spec.offloaded_layers);
  return name;
}

StaticPolicy::StaticPolicy(const StaticSpec& spec, CostSource& source)
    : spec_(spec), source_(source), name_(static_policy_name(spec)) {
  if (source_.prices({spec_.strategy, spec_.recompute})) return;
  if (spec_.recompute == Recompute::offload)
    throw InputError("--policy", 0, "",
                     name_ +
                         ": activation offload is priced by the analytic cost model (--costmodel analytic) "
                         "on GPUs with a host link (gpu.host_link_bytes_per_second in the cluster file); "
                         "the cost model (" +
                         source_.name() + ") and this cluster cannot price it");
  const std::string recomputed = spec_.recompute == Recompute::none
                                     ? ""
                                     : " with " + std::string(to_string(spec_.recompute)) + " recomputation";
  throw InputError("--policy", 0, "",
                   name_ + ": the cost model (" + source_.name() + ") cannot price " +
                       std::string(spec_.strategy->name()) + recomputed);
}

Decision StaticPolicy::decide(const MicroBatch& micro_batch) {
  const auto out_of_memory = [&](int64_t padded_tokens) {
    Decision nothing;
    nothing.policy = name_;
    nothing.tokens = micro_batch.tokens();
    nothing.padded_tokens = padded_tokens;
    nothing.evaluated_plans = 1;
    return nothing;
  };
  if (spec_.recompute == Recompute::offload) {
    std::optional<CostSource::PricedPlan> priced;
    try {
      priced =
          source_.uniform_estimate({spec_.strategy, spec_.recompute}, spec_.offloaded_layers, micro_batch);
    } catch (const TensorTooLarge&) {
      return out_of_memory(0);
    }
    PARADYSE_CHECK(priced.has_value(), "a source that prices offload prices whole plans");
    const steps::Estimate& estimate = priced->estimate;
    Decision decision;
    decision.policy = name_;
    decision.tokens = micro_batch.tokens();
    decision.padded_tokens = estimate.padded_tokens;
    decision.plan = std::move(priced->plan);
    decision.predicted_s = estimate.time.total_s;
    decision.predicted_peak_bytes = estimate.memory.peak_bytes;
    decision.fits = estimate.fits;
    decision.evaluated_plans = 1;
    return decision;
  }
  const steps::CostTable table = source_.table(micro_batch, {{spec_.strategy, spec_.recompute}});
  const auto index = table.find(*spec_.strategy, spec_.recompute);
  // The strategy would need a tensor no GPU holds at this length: out of memory.
  if (!index) return out_of_memory(table.padded_tokens);
  Decision decision = priced_decision(name_, table, uniform_choice(table, *index));
  decision.evaluated_plans = 1;
  return decision;
}

}  // namespace paradyse::selector
