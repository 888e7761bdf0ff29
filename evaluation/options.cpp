#include "evaluation/options.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/limits.hpp"
#include "selector/learned_cost_source.hpp"
#include "selector/static_policy.hpp"

namespace paradyse::evaluation {

ModelOverrides model_overrides(const std::string& attention, const std::string& attention_kernel,
                               const std::string& loss_kernel) {
  ModelOverrides overrides;
  if (!attention.empty()) overrides.causal = attention == "causal";
  if (!attention_kernel.empty()) {
    overrides.attention_kernel = attention_kernel_named(attention_kernel);
    PARADYSE_CHECK(overrides.attention_kernel.has_value(),
                   "unchecked --attention-kernel " + attention_kernel);
  }
  if (!loss_kernel.empty()) {
    overrides.loss_kernel = loss_kernel_named(loss_kernel);
    PARADYSE_CHECK(overrides.loss_kernel.has_value(), "unchecked --loss-kernel " + loss_kernel);
  }
  return overrides;
}

ModelSpec MachineOptions::load_model() const {
  return paradyse::load_model(model, model_overrides(attention, attention_kernel, loss_kernel));
}

hw::ClusterSpec MachineOptions::load_cluster() const {
  hw::ClusterSpec spec = hw::load_cluster(cluster, nodes);
  if (!framework.empty()) hw::use_framework(spec, hw::load_framework(framework));
  hw::use_attention_implementation(spec, attention_implementation, "--attention-implementation");
  return spec;
}

int64_t parse_length(const std::string& text, const std::string& flag) {
  int64_t value = 0;
  const char* last = text.data() + text.size();
  auto [rest, error] = std::from_chars(text.data(), last, value);
  int64_t scale = 1;
  const bool digits = error == std::errc() || error == std::errc::result_out_of_range;
  if (digits && rest + 1 == last && (*rest == 'K' || *rest == 'k')) scale = 1024, ++rest;
  if (digits && rest + 1 == last && (*rest == 'M' || *rest == 'm')) scale = 1024 * 1024, ++rest;
  const bool whole = !text.empty() && rest == last && text.front() != '-';
  if (whole && (error == std::errc::result_out_of_range ||
                (error == std::errc() && value > kMaxSequenceTokens / scale)))
    throw InputError(flag, 0, "",
                     "expected a length of at most " + max_sequence_tokens_text() + ", got '" + text + "'");
  if (!whole || error != std::errc() || value <= 0)
    throw InputError(
        flag, 0, "",
        "expected a positive token count (e.g. 4096, 16K, 1M; comma-separated for several), got '" + text +
            "'");
  return value * scale;
}

int64_t parse_bytes(const std::string& text, const std::string& flag, int64_t minimum) {
  constexpr int64_t kMaxBytes = int64_t{1} << 40;
  const auto refuse = [&] {
    return InputError(flag, 0, "",
                      "expected a size in bytes from " + bytes_text(minimum) +
                          " to 1 TiB (e.g. 65536, 64K, 64M, 1G: multiples of 1024), got '" + text + "'");
  };
  int64_t value = 0;
  const char* last = text.data() + text.size();
  const auto [rest, error] = std::from_chars(text.data(), last, value);
  if (error != std::errc() || text.front() == '-') throw refuse();
  int shift = 0;
  if (rest != last) {  // one unit letter: K, M or G
    const std::size_t unit =
        std::string_view("KMG").find(static_cast<char>(std::toupper(static_cast<unsigned char>(*rest))));
    if (rest + 1 != last || unit == std::string_view::npos) throw refuse();
    shift = 10 * static_cast<int>(unit + 1);
  }
  if (value > (kMaxBytes >> shift) || (value << shift) < minimum) throw refuse();
  return value << shift;
}

std::vector<int64_t> parse_lengths(const std::string& text, const std::string& flag) {
  std::vector<int64_t> lengths;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    lengths.push_back(parse_length(text.substr(start, end - start), flag));
    start = end + 1;
  }
  return lengths;
}

std::vector<const Strategy*> parse_strategies(const std::string& text, const std::string& flag,
                                              Repeats repeats) {
  if (text == "all") return all_strategies();
  std::vector<const Strategy*> strategies;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, end - start);
    const Strategy* strategy = find_strategy(name);
    if (strategy == nullptr)
      throw InputError(flag, 0, "",
                       "unknown strategy '" + name + "'; expected 'all' or one of: " + strategy_names());
    if (repeats == Repeats::refused &&
        std::find(strategies.begin(), strategies.end(), strategy) != strategies.end())
      throw InputError(flag, 0, "", "expected each strategy once, got '" + name + "' twice");
    strategies.push_back(strategy);
    start = end + 1;
  }
  return strategies;
}

Plan parse_plan(const std::string& text, const ModelSpec& model, Recompute recompute) {
  if (text == "all") throw InputError("--plan", 0, "", "expected one strategy or one per layer, got 'all'");
  const std::vector<const Strategy*> strategies = parse_strategies(text, "--plan", Repeats::allowed);
  if (strategies.size() == 1) return uniform_plan(*strategies.front(), model.num_layers, recompute);
  if (strategies.size() != static_cast<std::size_t>(model.num_layers))
    throw InputError("--plan", 0, "",
                     "expected one strategy, or one per layer of " + model.name + " (" +
                         std::to_string(model.num_layers) + "), got " + std::to_string(strategies.size()));
  Plan plan;
  for (const Strategy* strategy : strategies) plan.push_back({strategy, recompute});
  return plan;
}

Recompute parse_recompute_flag(const std::string& text) {
  if (auto recompute = parse_recompute(text)) return *recompute;
  throw InputError("--recompute", 0, "", "expected none, selective, full or offload, got '" + text + "'");
}

PolicySet PolicyOptions::build(const MachineOptions& machine, const hw::ClusterSpec* cluster) const {
  PolicySet set;
  set.model = machine.load_model();
  set.cluster = cluster != nullptr ? *cluster : machine.load_cluster();
  set.degree = degree == 0 ? set.cluster.num_gpus() : degree;
  if (set.degree < 1 || set.degree > set.cluster.num_gpus())
    throw InputError("--degree", 0, "",
                     "expected a degree between 1 and the " + std::to_string(set.cluster.num_gpus()) +
                         " GPUs of " + set.cluster.name + ", got " + std::to_string(degree));
  if (batch < 1)
    throw InputError("--batch", 0, "", "expected a positive batch size, got " + std::to_string(batch));

  // 'all' and 'all-2d' stand for the default policies the model allows at the degree, alone or beside
  // others (all,static:ulysses_z:offload).
  std::vector<std::string> names;
  for (std::size_t start = 0; start <= policies.size();) {
    const std::size_t end = std::min(policies.find(',', start), policies.size());
    const std::string item = policies.substr(start, end - start);
    start = end + 1;
    if (item != "all" && item != "all-2d") {
      names.push_back(item);
      continue;
    }
    for (const std::string& name : selector::default_policy_names(item == "all-2d")) {
      const auto fixed = selector::parse_static_policy(name);
      if (fixed && fixed->strategy->unsupported(set.model, set.degree)) continue;
      names.push_back(name);
    }
  }
  selector::ParadyseOptions paradyse;
  paradyse.gamma = gamma;
  paradyse.pruning = !no_pruning;
  paradyse.early_termination = !no_early_termination;
  paradyse.mixes = !no_mixes;
  paradyse.short_circuit = !no_short_circuit;
  paradyse.cache = !no_cache;
  paradyse.fallback = !no_fallback;
  selector::OptimalOptions optimal;
  optimal.recompute_choices = recompute_choices;
  if (!exclude.empty()) {
    paradyse.excluded = optimal.excluded = parse_strategies(exclude, "--exclude");
    const auto excluded = [&](const Strategy* s) {
      return std::find(paradyse.excluded.begin(), paradyse.excluded.end(), s) != paradyse.excluded.end();
    };
    bool any_left = false;
    const bool two_d = std::any_of(names.begin(), names.end(),
                                   [](const std::string& name) { return name.ends_with("-2d"); });
    for (const Strategy* s : selector::candidate_strategies(two_d))
      any_left = any_left || (!excluded(s) && !s->unsupported(set.model, set.degree));
    if (!any_left)
      throw InputError("--exclude", 0, "",
                       "expected to leave paradyse and optimal a strategy that can run " + set.model.name +
                           " at degree " + std::to_string(set.degree) + ", got '" + exclude + "'");
  }

  if (costmodel == "analytic")
    set.source = std::make_unique<selector::AnalyticCostSource>(set.model, set.cluster, set.degree, batch);
  else
    set.source =
        std::make_unique<selector::LearnedCostSource>(costmodel, set.model, set.cluster, set.degree, batch);

  std::set<std::string> seen;
  for (const std::string& name : names)
    if (!seen.insert(name).second)
      throw InputError("--policy", 0, "", "expected each policy once, got '" + name + "' twice");
  // A policy with no strategy that runs at this degree would count every sequence out of memory: the
  // degree is the error, and the message says what would run.
  for (const std::string& name : names) {
    if (name.starts_with("static:")) continue;
    const auto candidates = [&](bool two_d) {
      std::vector<const Strategy*> kept;
      for (const Strategy* s : selector::candidate_strategies(two_d))
        if (std::find(paradyse.excluded.begin(), paradyse.excluded.end(), s) == paradyse.excluded.end())
          kept.push_back(s);
      return kept;
    };
    const bool two_d = name.ends_with("-2d");
    const auto why = none_can_run(set.model, set.degree, candidates(two_d), set.cluster.num_gpus());
    if (!why) continue;
    const bool two_d_runs = !two_d && !none_can_run(set.model, set.degree, candidates(true), 0);
    throw InputError(
        "--degree", 0, "",
        name + " cannot run: " + *why +
            (two_d_runs ? " (--policy all-2d gives paradyse and optimal the 2-D strategies too)" : ""));
  }
  for (const std::string& name : names) {
    set.policies.push_back(selector::make_policy(name, *set.source, paradyse, optimal));
    const auto fixed = selector::parse_static_policy(name);
    if (!fixed) continue;
    if (fixed->offloaded_layers >= set.model.num_layers)
      throw InputError("--policy", 0, "",
                       name + ": expected to offload 1 to " + std::to_string(set.model.num_layers - 1) +
                           " of " + set.model.name + "'s " + std::to_string(set.model.num_layers) +
                           " layers (the last keeps its own; :offload offloads every other)");
    if (auto why = fixed->strategy->unsupported(set.model, set.degree))
      throw InputError(
          "--policy", 0, "",
          name + " cannot run " + set.model.name + " at degree " + std::to_string(set.degree) + ": " + *why);
  }
  return set;
}

}  // namespace paradyse::evaluation
