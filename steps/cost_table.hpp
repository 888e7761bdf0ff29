// What a selector needs to price any per-layer plan at one sequence length: the cost of one layer of
// each candidate (a strategy with its recomputation) and of the rest of the step, which every plan
// shares. Prices come from the analytic model (Estimator::cost_table) or from a learned model.
//
// A plan's time is the sum of its parts (the analytic model prices phases back to back) plus any
// switch cost between neighbouring layers (none: the unified layout makes switching free, but the
// table keeps the term so that a cost model with one could say so). Its memory is the fold of the
// analytic model along the iteration: embedding, every layer's forward (each adding the activations
// it keeps), head, every layer's backward in reverse, embedding backward, optimizer; the peak is
// where the running level plus a phase's own transient is highest, times the allocator's
// fragmentation, on top of weights, gradients and optimizer states. Not "whole-model peak ÷ L".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strategies/strategy.hpp"

namespace paradyse::steps {

// Net bytes a phase leaves allocated and its highest point above where it started.
struct MemoryStep {
  double peak_bytes = 0;
  double delta_bytes = 0;
};

struct LayerCost {
  double seconds = 0;  // forward, backward and optimizer step of one layer
  // Its forward, and its backward with any recomputation; 0 from a source that prices only whole
  // layers (a learned model).
  double forward_s = 0;
  double backward_s = 0;
  MemoryStep forward, backward, optimizer;
  double saved_bytes() const { return forward.delta_bytes; }  // kept from forward to backward
};

struct Candidate {
  const Strategy* strategy = nullptr;
  Recompute recompute = Recompute::none;
  LayerCost layer;
  std::string name() const;  // "megatron_ts", "megatron_ts:selective"
};

// Everything of the step but the layers.
struct StepCost {
  double seconds = 0;        // embedding, head and loss, embedding backward, their optimizer step
  double initial_bytes = 0;  // the step's inputs, live before it starts
  MemoryStep embedding_forward, head, embedding_backward, optimizer;
  double static_bytes = 0;   // weights, gradients, optimizer states
  double fragmentation = 0;  // fraction of live tensor bytes the caching allocator holds on top
  double capacity_bytes = 0;
};

struct CostTable {
  int num_layers = 0;
  int64_t tokens = 0;
  int64_t padded_tokens = 0;
  int degree = 0;
  int64_t batch = 1;
  StepCost step;
  std::vector<Candidate> candidates;
  // Seconds to switch from candidate i to candidate j between neighbouring layers; empty: free, as the
  // unified layout makes every switch between the strategies of the paper.
  std::vector<std::vector<double>> switch_costs;

  // Candidate indices, one per layer.
  using Choice = std::vector<int>;

  double switch_s(int from, int to) const;
  double plan_s(const Choice& choice) const;
  double plan_peak_bytes(const Choice& choice) const;
  bool fits(const Choice& choice) const { return plan_peak_bytes(choice) <= step.capacity_bytes; }
  Plan plan(const Choice& choice) const;
  std::optional<int> find(const Strategy& strategy, Recompute recompute = Recompute::none) const;
};

// The peaks of the plans whose first m layers are candidate `first` and the rest candidate `rest`,
// for any m from 0 to the table's layers: what a selector's two-strategy mixes need, each equal to
// plan_peak_bytes of that plan to the bit. In O(1) each where every memory figure the fold adds is a
// whole number of bytes and no sum of them can reach 2^53 (as the analytic model's are): then every
// sum is exact in any order, and each run of identical layers peaks at its first or last layer. Else
// by the fold itself.
class TwoPartPeaks {
 public:
  TwoPartPeaks(const CostTable& table, int first, int rest);
  double peak_bytes(int m) const;

 private:
  const CostTable* table_;
  int first_, rest_;
  bool exact_ = false;
};

}  // namespace paradyse::steps
