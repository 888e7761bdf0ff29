#include "selector/learned_cost_source.hpp"

#include <algorithm>

#include "common/errors.hpp"
#include "strategies/sequence_layout.hpp"

namespace paradyse::selector {

LearnedCostSource::LearnedCostSource(const std::string& path, ModelSpec model, hw::ClusterSpec cluster,
                                     int degree, int64_t batch)
    : path_(path),
      learned_(steps::LearnedModel::load(path)),
      model_(std::move(model)),
      cluster_(std::move(cluster)),
      degree_(degree == 0 ? cluster_.num_gpus() : degree),
      batch_(batch) {
  const auto mismatch = [&](const std::string& field, const std::string& fitted, const std::string& asked) {
    if (fitted != asked)
      throw InputError(path, 0, field,
                       "this cost model was fitted for " + field + " '" + fitted + "', not the '" + asked +
                           "' asked for; fit one on a profile of " + asked);
  };
  mismatch("model", learned_.model_name(), model_.name);
  mismatch("cluster", learned_.cluster_name(), cluster_.name);
  mismatch("degree", std::to_string(learned_.degree()), std::to_string(degree_));
  mismatch("batch", std::to_string(learned_.batch()), std::to_string(batch_));
  static_bytes_ = steps::static_memory_bytes(model_, degree_);
}

bool LearnedCostSource::prices(const CandidateKey& candidate) const {
  // Fitted per layer, it cannot price what a layer's offload leaves exposed under its neighbours.
  if (candidate.second == Recompute::offload) return false;
  return learned_.has(candidate.first->name(), std::string(to_string(candidate.second)));
}

steps::CostTable LearnedCostSource::table(const MicroBatch& micro_batch,
                                          const std::vector<CandidateKey>& wanted) {
  if (micro_batch.packed())
    throw InputError(
        "--costmodel", 0, "",
        "a learned model is fitted to one sequence per step and cannot price a packed micro-batch (" +
            micro_batch.describe() + "); use --costmodel analytic");
  const int64_t tokens = micro_batch.tokens();
  steps::CostTable table;
  table.num_layers = static_cast<int>(model_.num_layers);
  table.tokens = tokens;
  table.padded_tokens = SequenceLayout::padded_length(tokens, degree_, model_.causal);
  table.degree = degree_;
  table.batch = batch_;
  steps::StepCost& step = table.step;
  step.static_bytes = static_bytes_;
  step.fragmentation = cluster_.gpu.allocator_fragmentation;
  step.capacity_bytes = cluster_.tensor_capacity_bytes();
  const double layers = table.num_layers;
  for (const auto& [strategy, recompute] : wanted) {
    const std::string recompute_name(to_string(recompute));
    if (strategy->unsupported(model_, degree_) || !learned_.has(strategy->name(), recompute_name)) continue;
    const steps::LearnedPrediction p = learned_.predict(strategy->name(), recompute_name, tokens);
    const double activations =
        std::max(0.0, p.peak_memory_bytes - step.static_bytes) / (1 + step.fragmentation);
    const double saved = std::min(p.saved_bytes_per_layer, activations / layers);
    const double transient = activations - layers * saved;
    steps::Candidate& candidate = table.candidates.emplace_back();
    candidate.strategy = strategy;
    candidate.recompute = recompute;
    candidate.layer.seconds = p.iteration_time_s / layers;
    candidate.layer.forward = {saved + transient, saved};
    candidate.layer.backward = {transient, -saved};
  }
  return table;
}

}  // namespace paradyse::selector
