// What an evaluation runs on, as its user gives it (flags, or a sweep spec's fields): the model and
// cluster, the policies and their cost model, and the text forms of lengths, strategies and plans.
// Every value is checked where it is used, with an InputError naming the flag.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hw_models/cluster.hpp"
#include "selector/policy.hpp"
#include "strategies/model.hpp"
#include "strategies/strategy.hpp"

namespace paradyse::evaluation {

// The command line's overrides of a model's file: `attention` "", "causal" or "bidirectional",
// `attention_kernel` "", "flash" or "unfused"; `loss_kernel` "", "fused" or "unfused" (checked by the
// parser).
ModelOverrides model_overrides(const std::string& attention, const std::string& attention_kernel,
                               const std::string& loss_kernel);

struct MachineOptions {
  std::string model = "gpt-8l";
  std::string attention;         // "", "causal" or "bidirectional"
  std::string attention_kernel;  // "", "flash" or "unfused"
  std::string loss_kernel;       // "", "fused" or "unfused"
  std::string cluster = "dgx-a100";
  int nodes = 1;
  std::string framework;  // "": the cluster's own (its preset's, or its file's host block)
  // "": the GPU's own attention curves; else one of its attention_implementations.
  std::string attention_implementation;

  ModelSpec load_model() const;
  hw::ClusterSpec load_cluster() const;
};

struct PolicySet {
  ModelSpec model;
  hw::ClusterSpec cluster;
  int degree = 0;
  std::unique_ptr<selector::CostSource> source;
  std::vector<std::unique_ptr<selector::Policy>> policies;
};

// The policy flags of the commands that decide plans (plan, compare): which policies, on which cost
// model, and the paradyse policy's ablation switches.
struct PolicyOptions {
  std::string policies = "all";
  std::string costmodel = "analytic";
  int degree = 0;  // 0: every GPU of the cluster
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

  // Validates every flag; InputError naming the flag on a bad one. `cluster` replaces the machine's
  // when given (a sweep's variation of a preset).
  PolicySet build(const MachineOptions& machine, const hw::ClusterSpec* cluster = nullptr) const;
};

// One length: "4096", "16K" (×1024), "1M" (×1024²), positive and at most kMaxSequenceTokens. `flag`
// ("--seq") names the option in errors.
int64_t parse_length(const std::string& text, const std::string& flag);
// A size in bytes: "65536", "64K", "64M", "1G" (binary multiples: ×1024, ×1024², ×1024³), at least
// `minimum` and at most 1 TiB. `flag` names the option in errors.
int64_t parse_bytes(const std::string& text, const std::string& flag, int64_t minimum = 1);
// Comma-separated lengths, each as parse_length reads it.
std::vector<int64_t> parse_lengths(const std::string& text, const std::string& flag);
// "all", or comma-separated strategy names; a name given twice is refused unless a list may repeat
// names (a plan's layers).
enum class Repeats : bool { refused, allowed };
std::vector<const Strategy*> parse_strategies(const std::string& text, const std::string& flag,
                                              Repeats repeats = Repeats::refused);
Recompute parse_recompute_flag(const std::string& text);
// One strategy name (every layer), or a comma-separated name per layer of `model`.
Plan parse_plan(const std::string& text, const ModelSpec& model, Recompute recompute);

}  // namespace paradyse::evaluation
