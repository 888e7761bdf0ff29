// Policies: per input sequence, which strategy (and recomputation) on which layer.
//
//   static:NAME  every layer NAME; out of memory when it does not fit.
//   paradyse     the paper's Algorithm 1 (paradyse_policy.hpp).
//   optimal      the exact minimum-time plan under the memory limit (optimal_policy.hpp).
//
// A policy asks its CostSource for a CostTable at each length and answers with a Decision.
// Policies keep state across decisions (the paradyse policy's cache and previous plan), so a
// sequence of decisions in dataset order is what training would see.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "selector/cost_source.hpp"

namespace paradyse::selector {

struct Decision {
  std::string policy;
  int64_t tokens = 0;
  int64_t padded_tokens = 0;
  Plan plan;  // one entry per layer; empty when nothing fits and the policy has no fallback
  double predicted_s = 0;
  double predicted_peak_bytes = 0;
  bool fits = false;
  int switches = 0;            // layers whose strategy differs from the layer before
  int evaluated_plans = 0;     // plans this decision priced (0 when it came from the cache)
  bool from_cache = false;     // an earlier decision at the same (batch, length)
  bool kept_previous = false;  // γ-smoothing kept the previous sequence's plan
  bool fallback = false;       // nothing fit: the leanest strategy, reported as not fitting
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual const std::string& name() const = 0;
  virtual Decision decide(const MicroBatch& micro_batch) = 0;
  Decision decide(int64_t tokens) { return decide(MicroBatch::sequence(tokens)); }
  // Whether a decision depends on earlier ones (smoothing, a cache); if not, it depends on the
  // micro-batch alone and callers may reuse it.
  virtual bool remembers() const { return false; }
};

// The paper's Algorithm 1 and its ablations: each element can be switched off on its own.
struct ParadyseOptions {
  double gamma = 0.05;  // keep the previous plan if it fits and is within γ of the best; 0: off
  bool pruning = true;
  bool early_termination = true;
  bool mixes = true;
  bool short_circuit = true;
  bool cache = true;
  bool fallback = true;
  bool two_d = false;  // also the 2-D strategies (paradyse-2d)
  std::vector<const Strategy*> excluded;
};

struct OptimalOptions {
  bool recompute_choices = false;  // also choose each layer's recomputation
  // Enumerate candidate counts when there are at most this many ways to split the layers, else run
  // the label-setting search (optimal_policy.hpp); both are exact.
  double max_compositions = 200000;
  bool two_d = false;  // also the 2-D strategies (optimal-2d)
  std::vector<const Strategy*> excluded;
};

// "static:NAME", "paradyse", "optimal", or "paradyse-2d" and "optimal-2d", which also choose among the
// 2-D strategies; InputError on anything else or on γ outside [0, 1).
std::unique_ptr<Policy> make_policy(const std::string& spec, CostSource& source,
                                    const ParadyseOptions& paradyse = {}, const OptimalOptions& optimal = {});
// Every static:NAME of the paper's five, then paradyse and optimal; with `two_d` also static:NAME of
// every 2-D strategy, paradyse-2d and optimal-2d.
std::vector<std::string> default_policy_names(bool two_d = false);

// The decision for `choice` on `table`, priced (plan, time, peak, fits, switches).
Decision priced_decision(const std::string& policy, const steps::CostTable& table,
                         const steps::CostTable::Choice& choice);
// Every layer candidate `index`.
steps::CostTable::Choice uniform_choice(const steps::CostTable& table, int index);
// The candidate whose uniform plan has the lowest peak (first of equals); -1 for an empty table.
int leanest_candidate(const steps::CostTable& table);

}  // namespace paradyse::selector
