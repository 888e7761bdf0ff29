#include "steps/accuracy.hpp"

#include "common/errors.hpp"
#include "steps/estimate.hpp"

namespace paradyse::steps {
namespace {

void check_same(const std::string& file, const std::string& field, const std::string& in_file,
                const std::string& asked) {
  if (in_file != asked)
    throw InputError(file, 0, field,
                     "is '" + in_file + "', but '" + asked + "' was asked for (--model, --cluster)");
}

}  // namespace

AccuracyReport evaluate_accuracy(const LearnedModel& learned, const std::string& model_file,
                                 const Profile& heldout, const std::string& profile_file,
                                 const ModelSpec& model, const hw::ClusterSpec& cluster) {
  check_same(model_file, "model", learned.model_name(), model.name);
  check_same(model_file, "cluster", learned.cluster_name(), cluster.name);
  check_same(profile_file, "model", heldout.model, model.name);
  check_same(profile_file, "cluster", heldout.cluster, cluster.name);
  check_same(profile_file, "degree", std::to_string(heldout.degree), std::to_string(learned.degree()));
  check_same(profile_file, "batch", std::to_string(heldout.batch), std::to_string(learned.batch()));

  Estimator estimator(model, cluster);
  AccuracyReport report;
  for (const ProfilePoint& point : heldout.points) {
    const Strategy* strategy = find_strategy(point.strategy);
    if (strategy == nullptr || !learned.has(point.strategy, point.recompute)) continue;
    const LearnedPrediction predicted = learned.predict(point.strategy, point.recompute, point.seq);
    const Estimate estimated =
        estimator.estimate(*strategy, {.tokens = point.seq, .degree = heldout.degree, .batch = heldout.batch},
                           *parse_recompute(point.recompute));
    TimeAndMemoryErrors& learned_errors =
        predicted.extrapolated ? report.learned.outside : report.learned.inside;
    TimeAndMemoryErrors& analytic_errors =
        predicted.extrapolated ? report.analytic.outside : report.analytic.inside;
    learned_errors.time.add(predicted.iteration_time_s, point.iteration_time_s);
    learned_errors.memory.add(predicted.peak_memory_bytes, point.peak_memory_bytes);
    analytic_errors.time.add(estimated.time.total_s, point.iteration_time_s);
    analytic_errors.memory.add(estimated.memory.peak_bytes, point.peak_memory_bytes);
    ++report.points;
  }
  if (report.points == 0)
    throw InputError(profile_file, 0, "", "no point of a strategy the cost model knows; nothing to compare");
  return report;
}

}  // namespace paradyse::steps
