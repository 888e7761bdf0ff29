// Where a policy gets its prices: the analytic model over traced programs, or a learned model fitted
// to profiles (`--costmodel analytic|FILE`). Either way a policy sees a CostTable per length.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "steps/cost_table.hpp"
#include "steps/estimate.hpp"

namespace paradyse::selector {

using CandidateKey = std::pair<const Strategy*, Recompute>;

class CostSource {
 public:
  virtual ~CostSource() = default;
  virtual std::string name() const = 0;  // "analytic", or the learned model's file
  virtual int64_t batch() const = 0;
  // Costs of a micro-batch for the `wanted` candidates this source can price (others are left out). A
  // candidate it prices may still be left out at a length where it needs a tensor no GPU holds.
  virtual steps::CostTable table(const MicroBatch& micro_batch, const std::vector<CandidateKey>& wanted) = 0;
  // Whether this source prices `candidate` at all (a learned model knows the strategies it was fitted on;
  // activation offload needs whole plans priced, and GPUs with a host link).
  virtual bool prices(const CandidateKey& candidate) const = 0;
  // Every layer `candidate` (or, with `first_layers` > 0, that many first layers, the rest without
  // recomputation: Megatron-LM's --cpu-offloading-num-layers), priced as one program: what no cost
  // table composes (a layer's activation offload costs what its neighbours' compute leaves of its
  // copies); nullopt where this source prices no whole plans. Throws TensorTooLarge where a tensor of
  // the plan fits no GPU.
  struct PricedPlan {
    Plan plan;
    steps::Estimate estimate;
  };
  virtual std::optional<PricedPlan> uniform_estimate(const CandidateKey&, int /*first_layers*/,
                                                     const MicroBatch&) {
    return std::nullopt;
  }
};

class AnalyticCostSource final : public CostSource {
 public:
  // `degree` 0: every GPU of the cluster.
  AnalyticCostSource(ModelSpec model, hw::ClusterSpec cluster, int degree = 0, int64_t batch = 1);
  std::string name() const override { return "analytic"; }
  int64_t batch() const override { return batch_; }
  steps::CostTable table(const MicroBatch& micro_batch, const std::vector<CandidateKey>& wanted) override;
  bool prices(const CandidateKey& candidate) const override;
  std::optional<PricedPlan> uniform_estimate(const CandidateKey& candidate, int first_layers,
                                             const MicroBatch& micro_batch) override;

 private:
  steps::Estimator estimator_;
  int degree_;
  int64_t batch_;
};

// The strategies a policy chooses among: the paper's five, and with `two_d` the 2-D ones after them.
std::vector<const Strategy*> candidate_strategies(bool two_d = false);
// Each of candidate_strategies(two_d), with each recomputation when `recompute_choices`, else none only.
// With `offload`, also each strategy with its activations offloaded to host memory (Recompute::offload),
// which only programs priced whole can price (the group policies').
std::vector<CandidateKey> all_candidates(bool recompute_choices = false, bool two_d = false,
                                         bool offload = false);

}  // namespace paradyse::selector
