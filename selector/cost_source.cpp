#include "selector/cost_source.hpp"

namespace paradyse::selector {

AnalyticCostSource::AnalyticCostSource(ModelSpec model, hw::ClusterSpec cluster, int degree, int64_t batch)
    : estimator_(std::move(model), std::move(cluster)), degree_(degree), batch_(batch) {}

costmodel::CostTable AnalyticCostSource::table(const MicroBatch& micro_batch,
                                               const std::vector<CandidateKey>& wanted) {
  return estimator_.cost_table(
      wanted, {.tokens = micro_batch.tokens(),
               .degree = degree_,
               .batch = batch_,
               .documents = micro_batch.packed() ? micro_batch.documents : std::vector<int64_t>{}});
}

std::vector<CandidateKey> all_candidates(bool recompute_choices) {
  std::vector<CandidateKey> keys;
  for (const Strategy* strategy : paper_strategies()) {
    keys.emplace_back(strategy, Recompute::none);
    // METP always recomputes: its other settings are the same layer.
    if (!recompute_choices || strategy->always_recomputes()) continue;
    keys.emplace_back(strategy, Recompute::selective);
    keys.emplace_back(strategy, Recompute::full);
  }
  return keys;
}

}  // namespace paradyse::selector
