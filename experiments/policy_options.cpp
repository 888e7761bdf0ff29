#include "experiments/policy_options.hpp"

#include "selector/learned_cost_source.hpp"

namespace paradyse::cli {

void PolicyOptions::add_to(CLI::App& command) {
  command
      .add_option(
          "--policy", policies,
          "comma-separated policies: static:NAME (every layer NAME), paradyse (the paper's Algorithm 1), "
          "optimal (the exact minimum-time plan within memory); 'all' for every static strategy the "
          "model allows, paradyse and optimal")
      ->capture_default_str();
  command
      .add_option("--costmodel", costmodel,
                  "'analytic' (traced programs priced on the cluster) or a learned model file from "
                  "'paradyse costmodel fit'")
      ->capture_default_str();
  command.add_option("--degree", degree, "parallel degree P (default: every GPU of the cluster)");
  command.add_option("--batch", batch, "sequences per micro-batch")->capture_default_str();
  command.add_option("--gamma", gamma, "paradyse: keep the previous plan within this fraction of the best")
      ->capture_default_str();
  command.add_option("--exclude", exclude, "comma-separated strategies paradyse and optimal may not use");
  command.add_flag("--no-pruning", no_pruning,
                   "paradyse: keep strategies slower and not leaner than another");
  command.add_flag("--no-early-termination", no_early_termination,
                   "paradyse: search mixes even when the fastest strategy fits");
  command.add_flag("--no-mixes", no_mixes, "paradyse: uniform plans only");
  command.add_flag("--no-short-circuit", no_short_circuit,
                   "paradyse: price every mix of a pair, not only up to its first out-of-memory one");
  command.add_flag("--no-cache", no_cache, "paradyse: decide again at a length seen before");
  command.add_flag("--no-fallback", no_fallback,
                   "paradyse: no plan (instead of the leanest) when nothing fits");
  command.add_flag("--recompute-choices", recompute_choices,
                   "optimal: also choose each layer's activation recomputation (none, selective, full)");
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
  if (!exclude.empty()) paradyse.excluded = optimal.excluded = parse_strategies(exclude, "--exclude");

  if (costmodel == "analytic")
    set.source = std::make_unique<selector::AnalyticCostSource>(set.model, set.cluster, set.degree, batch);
  else
    set.source =
        std::make_unique<selector::LearnedCostSource>(costmodel, set.model, set.cluster, set.degree, batch);

  std::vector<std::string> names;
  if (policies == "all") {
    for (const std::string& name : selector::default_policy_names()) {
      const Strategy* strategy = name.starts_with("static:") ? find_strategy(name.substr(7)) : nullptr;
      if (strategy != nullptr && strategy->unsupported(set.model, set.degree)) continue;
      names.push_back(name);
    }
  } else {
    for (std::size_t start = 0; start <= policies.size();) {
      const std::size_t end = std::min(policies.find(',', start), policies.size());
      names.push_back(policies.substr(start, end - start));
      start = end + 1;
    }
  }
  for (const std::string& name : names) {
    set.policies.push_back(selector::make_policy(name, *set.source, paradyse, optimal));
    const Strategy* strategy = name.starts_with("static:") ? find_strategy(name.substr(7)) : nullptr;
    if (strategy == nullptr) continue;
    if (auto why = strategy->unsupported(set.model, set.degree))
      throw InputError(
          "--policy", 0, "",
          name + " cannot run " + set.model.name + " at degree " + std::to_string(set.degree) + ": " + *why);
  }
  return set;
}

}  // namespace paradyse::cli
