// Command-line values shared by the subcommands: model and cluster selection, length lists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "hw_models/cluster.hpp"
#include "strategies/model.hpp"
#include "strategies/strategy.hpp"

namespace paradyse::cli {

struct MachineOptions {
  std::string model = "gpt-8l";
  std::string attention;  // "", "causal" or "bidirectional"
  std::string cluster = "dgx-a100";
  int nodes = 1;

  void add_to(CLI::App& command);
  ModelSpec load_model() const;
  hw::ClusterSpec load_cluster() const;
};

// "4096", "16K" (×1024), "1M" (×1024²), comma-separated; each must be positive. `flag`
// ("--seq") names the option in errors.
std::vector<int64_t> parse_lengths(const std::string& text, const std::string& flag);
// "all", or comma-separated strategy names.
std::vector<const Strategy*> parse_strategies(const std::string& text, const std::string& flag);
Recompute parse_recompute_flag(const std::string& text);
// One strategy name (every layer), or a comma-separated name per layer of `model`.
Plan parse_plan(const std::string& text, const ModelSpec& model, Recompute recompute);

}  // namespace paradyse::cli
