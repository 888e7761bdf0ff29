// The policy flags shared by the commands that decide plans (plan, compare): which policies, on which
// cost model, and the paradyse policy's ablation switches.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "experiments/inputs.hpp"
#include "selector/policy.hpp"

namespace paradyse::cli {

struct PolicySet {
  ModelSpec model;
  hw::ClusterSpec cluster;
  int degree = 0;
  std::unique_ptr<selector::CostSource> source;
  std::vector<std::unique_ptr<selector::Policy>> policies;
};

struct PolicyOptions {
  std::string policies = "all";
  std::string costmodel = "analytic";
  int degree = 0;
  int64_t batch = 1;
  double gamma = 0.05;
  std::string exclude;
  bool no_pruning = false;
  bool no_early_termination = false;
  bool no_mixes = false;
  bool no_short_circuit = false;
  bool no_cache = false;
  bool no_fallback = false;
  bool recompute_choices = false;

  void add_to(CLI::App& command);
  // Validates every flag; InputError naming the flag on a bad one. `cluster` replaces the machine's
  // when given (a sweep's variation of a preset).
  PolicySet build(const MachineOptions& machine, const hw::ClusterSpec* cluster = nullptr) const;
};

}  // namespace paradyse::cli
