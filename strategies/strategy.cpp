#include "strategies/strategy.hpp"

#include <algorithm>

#include "strategies/library.hpp"

namespace paradyse {

std::string_view to_string(Recompute recompute) {
  switch (recompute) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
    case Recompute::offload:
      return "offload";
  }
  return "?";
}

std::optional<Recompute> parse_recompute(std::string_view text) {
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full, Recompute::offload})
    if (to_string(r) == text) return r;
  return std::nullopt;
}

std::vector<int64_t> LayerWeights::qkv_groups(const ModelSpec& model, int degree) {
  const int64_t d = model.head_dim();
  return {model.heads * d / degree, model.kv_heads * d / degree, model.kv_heads * d / degree};
}

std::vector<int64_t> LayerWeights::mlp_in_groups(const ModelSpec& model, int degree) {
  if (model.mlp == MlpKind::swiglu) return {model.ffn_hidden / degree, model.ffn_hidden / degree};
  return {model.ffn_hidden / degree};
}

std::vector<LayerWeights::RowBlock> LayerWeights::shard_blocks(const std::vector<int64_t>& groups, int degree,
                                                               int rank) {
  std::vector<RowBlock> blocks;
  int64_t group_start = 0;
  for (const int64_t rows : groups) {
    blocks.push_back({group_start * degree + rank * rows, group_start, rows});
    group_start += rows;
  }
  return blocks;
}

std::optional<std::string> Strategy::unsupported(const ModelSpec& model, int degree) const {
  if (auto why = whole_heads(model, degree)) return why;
  return layout_rows(model, degree);
}

std::optional<std::string> layout_rows(const ModelSpec& model, int degree) {
  const std::string p = std::to_string(degree);
  if (degree < 1) return "the degree must be at least 1, got " + p;
  const auto rows = [&](int64_t count, const std::string& what) -> std::optional<std::string> {
    if (count % degree == 0) return std::nullopt;
    return "degree " + p + " must divide the " + what + " " + std::to_string(count) +
           " (every rank holds 1/" + p + " of each weight matrix's rows in the unified layout)";
  };
  if (auto why = rows(model.hidden, "hidden size")) return why;
  if (auto why = rows(model.kv_hidden(), "key/value width a_kv·d =")) return why;
  return rows(model.ffn_hidden, "FFN size");
}

std::optional<std::string> two_groups(std::string_view name, int inner, std::string_view inner_kind,
                                      std::string_view one_group, int degree) {
  if (degree % inner == 0 && degree > inner) return std::nullopt;
  const std::string groups = std::to_string(inner);
  return std::string(name) + " needs a degree that is a multiple of its " + std::string(inner_kind) +
         " groups of " + groups + " ranks with at least two groups for its ring, got " +
         std::to_string(degree) +
         (degree == inner ? " (one group of " + groups + " is " + std::string(one_group) + ")" : "");
}

std::optional<std::string> whole_heads(const ModelSpec& model, int degree) {
  const std::string p = std::to_string(degree);
  if (degree >= 1 && model.heads % degree != 0)
    return "degree " + p + " must divide the " + std::to_string(model.heads) +
           " attention heads (every rank computes whole heads)";
  if (degree >= 1 && model.kv_heads % degree != 0)
    return "degree " + p + " must divide the " + std::to_string(model.kv_heads) +
           " key/value heads (every rank computes whole heads)";
  return std::nullopt;
}

std::optional<std::string> none_can_run(const ModelSpec& model, int degree,
                                        const std::vector<const Strategy*>& candidates, int max_degree) {
  std::vector<std::pair<std::string, std::string>> reasons;  // reason, the strategies it stops
  for (const Strategy* strategy : candidates) {
    const std::optional<std::string> why = strategy->unsupported(model, degree);
    if (!why) return std::nullopt;
    auto same = std::find_if(reasons.begin(), reasons.end(), [&](const auto& r) { return r.first == *why; });
    if (same == reasons.end()) same = reasons.insert(reasons.end(), {*why, ""});
    same->second.append(same->second.empty() ? "" : ", ").append(strategy->name());
  }
  std::string names;
  for (const Strategy* strategy : candidates)
    names.append(names.empty() ? "" : ", ").append(strategy->name());
  std::string text = (candidates.size() == 1 ? names : "none of " + names) +
                     (candidates.size() == 1 ? " cannot" : " can") + " run " + model.name + " at degree " +
                     std::to_string(degree) + ": ";
  for (std::size_t r = 0; r < reasons.size(); ++r) {
    text.append(r == 0 ? "" : "; ");
    if (reasons.size() > 1) text.append(reasons[r].second).append(": ");
    text.append(reasons[r].first);
  }
  // Every strategy splits the hidden size's rows over its ranks: only its divisors can run.
  std::string degrees;
  for (int64_t p = 1; p <= std::min<int64_t>(max_degree, model.hidden); ++p)
    if (model.hidden % p == 0 && std::any_of(candidates.begin(), candidates.end(), [&](const Strategy* s) {
          return !s->unsupported(model, static_cast<int>(p));
        }))
      degrees.append(degrees.empty() ? "" : ", ").append(std::to_string(p));
  const std::string they = candidates.size() == 1 ? "It runs" : "They run";
  if (max_degree > 0)
    text.append(degrees.empty() ? ". " + they + " at no degree up to " + std::to_string(max_degree)
                                : ". " + they + " at degrees " + degrees);
  std::string others;
  for (const Strategy* strategy : all_strategies())
    if (std::find(candidates.begin(), candidates.end(), strategy) == candidates.end() &&
        !strategy->unsupported(model, degree))
      others.append(others.empty() ? "" : ", ").append(strategy->name());
  if (!others.empty()) text.append("; at degree " + std::to_string(degree) + " these run: " + others);
  return text;
}

std::strong_ordering operator<=>(const LayerChoice& a, const LayerChoice& b) {
  const std::string_view a_name = a.strategy != nullptr ? a.strategy->name() : std::string_view{},
                         b_name = b.strategy != nullptr ? b.strategy->name() : std::string_view{};
  if (const auto by_name = a_name <=> b_name; by_name != 0) return by_name;
  if (a.strategy != b.strategy) return std::compare_three_way{}(a.strategy, b.strategy);  // same name: rare
  return a.recompute <=> b.recompute;
}

Plan uniform_plan(const Strategy& strategy, int64_t num_layers, Recompute recompute) {
  return Plan(static_cast<std::size_t>(num_layers), LayerChoice{&strategy, recompute});
}

std::string plan_name(const Plan& plan) {
  auto layer_name = [](const LayerChoice& layer) {
    std::string name(layer.strategy->name());
    if (layer.recompute != Recompute::none) name.append(":").append(to_string(layer.recompute));
    return name;
  };
  if (std::all_of(plan.begin(), plan.end(), [&](const LayerChoice& l) { return l == plan.front(); }))
    return plan.empty() ? "" : layer_name(plan.front());
  std::string name;
  for (const LayerChoice& layer : plan) name.append(name.empty() ? "" : ",").append(layer_name(layer));
  return name;
}

std::string plan_runs_name(const Plan& plan) {
  if (plan.empty()) return "-";
  std::string text;
  for (std::size_t l = 0; l < plan.size();) {
    std::size_t end = l;
    while (end < plan.size() && plan[end] == plan[l]) ++end;
    if (!text.empty()) text += ",";
    text += plan_name({plan[l]});
    if (end - l > 1) text += "x" + std::to_string(end - l);
    l = end;
  }
  return text;
}

const std::vector<const Strategy*>& paper_strategies() {
  static const std::vector<const Strategy*> strategies{&megatron_ts(), &megatron_cz(), &ulysses_z(),
                                                       &colossal_z(), &metp()};
  return strategies;
}

const std::vector<const Strategy*>& all_strategies() {
  static const std::vector<const Strategy*> strategies = [] {
    std::vector<const Strategy*> all = paper_strategies();
    all.push_back(&megatron_tp());
    all.insert(all.end(), usp_strategies().begin(), usp_strategies().end());
    all.insert(all.end(), tp_cp_strategies().begin(), tp_cp_strategies().end());
    return all;
  }();
  return strategies;
}

std::vector<const Strategy*> strategies_for(const ModelSpec& model, int degree) {
  std::vector<const Strategy*> runnable;
  for (const Strategy* s : all_strategies())
    if (!s->unsupported(model, degree)) runnable.push_back(s);
  return runnable;
}

const Strategy* find_strategy(std::string_view name) {
  for (const Strategy* s : all_strategies())
    if (s->name() == name) return s;
  return nullptr;
}

std::string strategy_names() {
  std::string names;
  for (const Strategy* s : all_strategies()) names += (names.empty() ? "" : ", ") + std::string(s->name());
  return names;
}

}  // namespace paradyse
