#include "steps/cost_table.hpp"

#include <algorithm>
#include <cmath>

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

TwoPartPeaks::TwoPartPeaks(const CostTable& table, int first, int rest)
    : table_(&table), first_(first), rest_(rest) {
  const StepCost& step = table.step;
  const LayerCost& a = table.candidates.at(static_cast<std::size_t>(first)).layer;
  const LayerCost& b = table.candidates.at(static_cast<std::size_t>(rest)).layer;
  // Every figure whole, and the sum of their magnitudes, each layer's counted once per layer, below
  // 2^53: no partial sum of the fold can then round.
  double step_bound = std::abs(step.initial_bytes), layer_bound = 0;
  bool whole = step.initial_bytes == std::floor(step.initial_bytes);
  const auto add = [&](const MemoryStep& phase, double& bound) {
    for (const double bytes : {phase.peak_bytes, phase.delta_bytes}) {
      whole = whole && std::isfinite(bytes) && bytes == std::floor(bytes);
      bound += std::abs(bytes);
    }
  };
  for (const MemoryStep* phase :
       {&step.embedding_forward, &step.head, &step.embedding_backward, &step.optimizer})
    add(*phase, step_bound);
  for (const LayerCost* layer : {&a, &b})
    for (const MemoryStep* phase : {&layer->forward, &layer->backward, &layer->optimizer})
      add(*phase, layer_bound);
  exact_ = whole && step_bound + layer_bound * table.num_layers < 0x1p53;
}

double TwoPartPeaks::peak_bytes(int m) const {
  const CostTable& table = *table_;
  const int layers = table.num_layers;
  PARADYSE_CHECK(m >= 0 && m <= layers, "a mix of 0 to num_layers layers of its first candidate");
  if (!exact_) {
    CostTable::Choice choice(static_cast<std::size_t>(layers), rest_);
    std::fill_n(choice.begin(), m, first_);
    return table.plan_peak_bytes(choice);
  }
  const StepCost& step = table.step;
  const LayerCost& a = table.candidates[static_cast<std::size_t>(first_)].layer;
  const LayerCost& b = table.candidates[static_cast<std::size_t>(rest_)].layer;
  double level = step.initial_bytes, peak = level;
  const auto apply = [&](const MemoryStep& phase) {
    peak = std::max(peak, level + phase.peak_bytes);
    level += phase.delta_bytes;
  };
  // `count` phases alike in a row: their peaks rise or fall with the level, so the first's or the
  // last's is the highest.
  const auto apply_run = [&](const MemoryStep& phase, int count) {
    if (count == 0) return;
    peak = std::max(peak, level + phase.peak_bytes + std::max(0.0, (count - 1) * phase.delta_bytes));
    level += count * phase.delta_bytes;
  };
  apply(step.embedding_forward);
  apply_run(a.forward, m);
  apply_run(b.forward, layers - m);
  apply(step.head);
  apply_run(b.backward, layers - m);
  apply_run(a.backward, m);
  apply(step.embedding_backward);
  apply_run(a.optimizer, m);
  apply_run(b.optimizer, layers - m);
  apply(step.optimizer);
  return step.static_bytes + peak * (1 + step.fragmentation);
}

}  // namespace paradyse::steps
