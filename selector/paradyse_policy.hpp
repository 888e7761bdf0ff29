// The paper's Algorithm 1 (ParaDySe, AAAI-26), per input sequence of length s with batch b:
//  1. cache: a plan decided before at the same (b, s) is reused (for a packed micro-batch, the same b and
//     documents);
//  2. Pareto pruning: a strategy slower and not leaner than another (uniform plans) is dropped;
//  3. early termination: if the fastest remaining strategy fits, every layer uses it;
//  4. two-strategy mixes: for each pair (faster a, leaner b), m = 1, 2, ... layers of a (first) and
//     L − m of b; the OOM short-circuit ends a pair's family at its first m that does not fit, since
//     more layers of the faster strategy only need more memory;
//  5. the least predicted time among the uniform plans and mixes that fit;
//  6. γ-smoothing: the previous sequence's plan is kept if it fits and is within γ of that best,
//     which saves switches between neighbouring lengths;
//  7. fallback: if nothing fits, the leanest strategy (reported as not fitting).
// Each element can be switched off (ParadyseOptions) for the paper's ablations, and strategies can
// be excluded. Plans are priced with the cost table's memory fold, the same as `optimal`'s.
#pragma once

#include <map>
#include <optional>

#include "selector/policy.hpp"

namespace paradyse::selector {

class ParadysePolicy final : public Policy {
 public:
  ParadysePolicy(CostSource& source, ParadyseOptions options);
  const std::string& name() const override { return name_; }
  using Policy::decide;
  Decision decide(const MicroBatch& micro_batch) override;
  bool remembers() const override { return true; }
  // Steps 2–7 on a given table (no cache).
  Decision decide(const steps::CostTable& table);

 private:
  CostSource& source_;
  ParadyseOptions options_;
  std::string name_;
  std::vector<CandidateKey> candidates_;
  std::map<std::pair<int64_t, std::vector<int64_t>>, Decision> cache_;  // by (batch, documents sorted)
  std::optional<Plan> previous_;
};

}  // namespace paradyse::selector
