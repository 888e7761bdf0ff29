#include "experiments/inputs.hpp"

#include <charconv>

#include "common/errors.hpp"

namespace paradyse::cli {

void MachineOptions::add_to(CLI::App& command) {
  command
      .add_option(
          "--model", model,
          "model preset (" +
              [] {
                std::string names;
                for (const std::string& n : model_preset_names()) names += (names.empty() ? "" : ", ") + n;
                return names;
              }() +
              ") or a Hugging Face config.json")
      ->capture_default_str();
  command
      .add_option("--attention", attention, "override the model's attention mask: causal or bidirectional")
      ->check(CLI::IsMember({"causal", "bidirectional"}));
  command
      .add_option(
          "--cluster", cluster,
          "cluster preset (" +
              [] {
                std::string names;
                for (const std::string& n : hw::cluster_preset_names())
                  names += (names.empty() ? "" : ", ") + n;
                return names;
              }() +
              ") or a cluster JSON file")
      ->capture_default_str();
  command.add_option("--nodes", nodes, "number of nodes of the cluster preset")->capture_default_str();
}

ModelSpec MachineOptions::load_model() const {
  std::optional<bool> causal;
  if (!attention.empty()) causal = attention == "causal";
  return paradyse::load_model(model, causal);
}

hw::ClusterSpec MachineOptions::load_cluster() const {
  return hw::load_cluster(cluster, nodes);
}

std::vector<int64_t> parse_lengths(const std::string& text, const std::string& flag) {
  std::vector<int64_t> lengths;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    int64_t value = 0;
    const char* first = item.data();
    const char* last = item.data() + item.size();
    auto [rest, error] = std::from_chars(first, last, value);
    int64_t scale = 1;
    if (error == std::errc() && rest + 1 == last && (*rest == 'K' || *rest == 'k')) scale = 1024, ++rest;
    if (error == std::errc() && rest + 1 == last && (*rest == 'M' || *rest == 'm'))
      scale = 1024 * 1024, ++rest;
    if (item.empty() || error != std::errc() || rest != last || value <= 0)
      throw InputError(
          flag, 0, "",
          "expected a positive token count (e.g. 4096, 16K, 1M; comma-separated for several), got '" + item +
              "'");
    lengths.push_back(value * scale);
    start = end + 1;
  }
  return lengths;
}

std::vector<const Strategy*> parse_strategies(const std::string& text, const std::string& flag) {
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
    strategies.push_back(strategy);
    start = end + 1;
  }
  return strategies;
}

Plan parse_plan(const std::string& text, const ModelSpec& model, Recompute recompute) {
  if (text == "all") throw InputError("--plan", 0, "", "expected one strategy or one per layer, got 'all'");
  const std::vector<const Strategy*> strategies = parse_strategies(text, "--plan");
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
  throw InputError("--recompute", 0, "", "expected none, selective or full, got '" + text + "'");
}

}  // namespace paradyse::cli
