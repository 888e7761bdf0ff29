// optimal: the exact minimum-time plan under the memory limit over every per-layer assignment of the
// available candidates (strategies, and with recompute_choices each layer's recomputation too).
//
// The memory model is the cost table's fold, taken exactly. Every layer's backward frees what its
// forward kept (checked), so where layer l peaks depends only on the bytes kept by the layers before
// it, and candidate c fits at layer l exactly when those bytes are within its window:
//   forward:  base + kept(<l) + forward_peak(c)                            <= budget
//   backward: base + head carry + kept(<l) + saved(c) + backward_peak(c)    <= budget
// with one more window, the head's, on the bytes kept by all layers. Plan time is the sum of the
// layers' times plus any switch costs between neighbours.
//
// Two exact searches, by a stated rule:
// - Without switch costs, a multiset of layers fits in some order iff it fits ordered by window +
//   kept bytes (an exchange argument: of two neighbours, the one with the smaller sum can always go
//   first), so only the count of each candidate matters. When the counts to try are few (at most
//   OptimalOptions::max_compositions, 200,000 by default, compositions of L into the candidates left
//   after dropping dominated ones), they are
//   enumerated in that order with branch and bound; the plan comes out grouped, with the fewest
//   switches.
// - Otherwise (more candidates, or switch costs): a dynamic program over the layer × candidate DAG,
//   a resource-constrained shortest path solved by label setting. A label is (seconds so far, bytes
//   kept so far), extended through every candidate whose window admits it, and dropped when another
//   label at its node has no more of either, or when a linear relaxation of the layers left cannot
//   beat the best known plan. With switch costs, labels are kept per last candidate.
#pragma once

#include "selector/policy.hpp"

namespace paradyse::selector {

class OptimalPolicy final : public Policy {
 public:
  OptimalPolicy(CostSource& source, OptimalOptions options);
  const std::string& name() const override { return name_; }
  using Policy::decide;
  Decision decide(const MicroBatch& micro_batch) override;
  Decision decide(const steps::CostTable& table) const;

 private:
  CostSource& source_;
  std::string name_ = "optimal";
  std::vector<CandidateKey> candidates_;
  double max_compositions_;
};

}  // namespace paradyse::selector
