#include "evaluation/profiling.hpp"

namespace paradyse::evaluation {

steps::Profile profile_uniform_plans(steps::Estimator& estimator, steps::StepSimulator* simulator, int degree,
                                     int64_t batch, const std::vector<const Strategy*>& strategies,
                                     const std::vector<int64_t>& lengths) {
  const ModelSpec& model = estimator.model();
  steps::Profile profile{
      model.name, estimator.cluster().name, degree, batch, simulator != nullptr ? "sim" : "analytic", {}};
  for (const Strategy* strategy : strategies) {
    if (strategy->unsupported(model, degree)) continue;
    for (int64_t tokens : lengths) {
      const steps::EstimateRequest request{.tokens = tokens, .degree = degree, .batch = batch};
      const Plan plan = uniform_plan(*strategy, model.num_layers);
      steps::ProfilePoint& point = profile.points.emplace_back();
      point.strategy = strategy->name();
      point.seq = tokens;
      point.saved_bytes_per_layer =
          estimator.cost_table({{strategy, Recompute::none}}, request).candidates.front().layer.saved_bytes();
      const steps::Estimate estimate = estimator.estimate(plan, request);
      point.peak_memory_bytes = estimate.memory.peak_bytes;
      point.iteration_time_s =
          simulator != nullptr ? simulator->simulate(plan, request).iteration_time_s : estimate.time.total_s;
    }
  }
  return profile;
}

}  // namespace paradyse::evaluation
