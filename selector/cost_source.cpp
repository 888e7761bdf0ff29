#include "selector/cost_source.hpp"

#include "strategies/library.hpp"

namespace paradyse::selector {

AnalyticCostSource::AnalyticCostSource(ModelSpec model, hw::ClusterSpec cluster, int degree, int64_t batch)
    : estimator_(std::move(model), std::move(cluster)), degree_(degree), batch_(batch) {}

steps::CostTable AnalyticCostSource::table(const MicroBatch& micro_batch,
                                           const std::vector<CandidateKey>& wanted) {
  return estimator_.cost_table(
      wanted, {.tokens = micro_batch.tokens(),
               .degree = degree_,
               .batch = batch_,
               .documents = micro_batch.packed() ? micro_batch.documents : std::vector<int64_t>{}});
}

bool AnalyticCostSource::prices(const CandidateKey& candidate) const {
  return candidate.second != Recompute::offload || estimator_.cluster().gpu.host_link_bytes_per_second > 0;
}

std::optional<CostSource::PricedPlan> AnalyticCostSource::uniform_estimate(const CandidateKey& candidate,
                                                                           int first_layers,
                                                                           const MicroBatch& micro_batch) {
  PricedPlan priced;
  priced.plan = uniform_plan(*candidate.first, estimator_.model().num_layers, candidate.second);
  if (first_layers > 0)
    for (std::size_t l = static_cast<std::size_t>(first_layers); l < priced.plan.size(); ++l)
      priced.plan[l].recompute = Recompute::none;
  priced.estimate = estimator_.estimate(
      priced.plan, {.tokens = micro_batch.tokens(),
                    .degree = degree_,
                    .batch = batch_,
                    .documents = micro_batch.packed() ? micro_batch.documents : std::vector<int64_t>{}});
  return priced;
}

std::vector<const Strategy*> candidate_strategies(bool two_d) {
  std::vector<const Strategy*> strategies = paper_strategies();
  if (two_d) {
    strategies.insert(strategies.end(), usp_strategies().begin(), usp_strategies().end());
    strategies.insert(strategies.end(), tp_cp_strategies().begin(), tp_cp_strategies().end());
  }
  return strategies;
}

std::vector<CandidateKey> all_candidates(bool recompute_choices, bool two_d, bool offload) {
  std::vector<CandidateKey> keys;
  for (const Strategy* strategy : candidate_strategies(two_d)) {
    keys.emplace_back(strategy, Recompute::none);
    if (!recompute_choices) continue;
    // METP always recomputes (it keeps only its input, which it may offload too).
    if (!strategy->always_recomputes()) {
      keys.emplace_back(strategy, Recompute::selective);
      keys.emplace_back(strategy, Recompute::full);
    }
    if (offload) keys.emplace_back(strategy, Recompute::offload);
  }
  return keys;
}

}  // namespace paradyse::selector
