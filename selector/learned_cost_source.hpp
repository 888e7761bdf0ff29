// Prices plans with a learned model (steps/learned_model.hpp): the paper's random forest inside
// the profiled lengths, a polynomial beyond. The model predicts, per strategy, the iteration time and
// peak memory of its uniform plan and the activations one layer keeps; the table spreads them over
// the layers: each layer takes 1/L of the time, keeps its predicted bytes, and peaks with the rest of
// the uniform plan's peak (above the static terms and every layer's kept bytes) as its transient, so
// that a uniform plan gets back exactly the predicted time and peak and a mix combines its layers
// with the same fold as the analytic table.
#pragma once

#include "selector/cost_source.hpp"
#include "steps/learned_model.hpp"

namespace paradyse::selector {

class LearnedCostSource final : public CostSource {
 public:
  // Loads `path`; InputError when it was fitted for another model, cluster, degree or batch.
  LearnedCostSource(const std::string& path, ModelSpec model, hw::ClusterSpec cluster, int degree,
                    int64_t batch);
  std::string name() const override { return path_; }
  int64_t batch() const override { return batch_; }
  steps::CostTable table(const MicroBatch& micro_batch, const std::vector<CandidateKey>& wanted) override;
  bool prices(const CandidateKey& candidate) const override;

 private:
  std::string path_;
  steps::LearnedModel learned_;
  ModelSpec model_;
  hw::ClusterSpec cluster_;
  int degree_;
  int64_t batch_;
  double static_bytes_;  // weights, gradients, optimizer states: the same at every length
};

}  // namespace paradyse::selector
