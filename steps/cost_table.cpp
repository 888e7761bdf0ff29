#include "steps/cost_table.hpp"

#include <algorithm>

#include "common/errors.hpp"

namespace paradyse::steps {

std::string Candidate::name() const {
  std::string text(strategy->name());
  if (recompute != Recompute::none) text += ":" + std::string(to_string(recompute));
  return text;
}

double CostTable::switch_s(int from, int to) const {
  if (switch_costs.empty()) return 0;
  return switch_costs[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)];
}

double CostTable::plan_s(const Choice& choice) const {
  PARADYSE_CHECK(choice.size() == static_cast<std::size_t>(num_layers), "a plan of the wrong length");
  double seconds = step.seconds;
  for (std::size_t l = 0; l < choice.size(); ++l) {
    seconds += candidates[static_cast<std::size_t>(choice[l])].layer.seconds;
    if (l > 0) seconds += switch_s(choice[l - 1], choice[l]);
  }
  return seconds;
}

double CostTable::plan_peak_bytes(const Choice& choice) const {
  PARADYSE_CHECK(choice.size() == static_cast<std::size_t>(num_layers), "a plan of the wrong length");
  double level = step.initial_bytes, peak = level;
  const auto apply = [&](const MemoryStep& phase) {
    peak = std::max(peak, level + phase.peak_bytes);
    level += phase.delta_bytes;
  };
  const auto layer = [&](int index) -> const LayerCost& {
    return candidates[static_cast<std::size_t>(index)].layer;
  };
  apply(step.embedding_forward);
  for (int c : choice) apply(layer(c).forward);
  apply(step.head);
  for (auto c = choice.rbegin(); c != choice.rend(); ++c) apply(layer(*c).backward);
  apply(step.embedding_backward);
  for (int c : choice) apply(layer(c).optimizer);
  apply(step.optimizer);
  return step.static_bytes + peak * (1 + step.fragmentation);
}

Plan CostTable::plan(const Choice& choice) const {
  Plan plan;
  for (int c : choice) {
    const Candidate& candidate = candidates[static_cast<std::size_t>(c)];
    plan.push_back({candidate.strategy, candidate.recompute});
  }
  return plan;
}

std::optional<int> CostTable::find(const Strategy& strategy, Recompute recompute) const {
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].strategy == &strategy && candidates[i].recompute == recompute)
      return static_cast<int>(i);
  return std::nullopt;
}

}  // namespace paradyse::steps
