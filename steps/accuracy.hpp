// How well the cost models predict measured points: the learned model and the analytic one against a
// held-out profile, as absolute percentage errors of iteration time and peak memory, apart inside and
// outside the lengths the learned model was fitted on (the paper fits and evaluates on the same data
// and reports no accuracy; this is that report).
#pragma once

#include <string>

#include "common/statistics.hpp"
#include "hw_models/cluster.hpp"
#include "steps/learned_model.hpp"
#include "steps/profile.hpp"
#include "strategies/model.hpp"

namespace paradyse::steps {

struct TimeAndMemoryErrors {
  PercentageErrors time, memory;
};

struct ModelAccuracy {
  TimeAndMemoryErrors inside, outside;  // of the learned model's profiled lengths
};

struct AccuracyReport {
  int points = 0;  // held-out points compared (those of strategies both models know)
  ModelAccuracy learned, analytic;
};

// Both files must describe `model` on `cluster`, at one degree and batch: InputError naming the
// file (model_file, profile_file) and its field otherwise, and when no point can be compared.
AccuracyReport evaluate_accuracy(const LearnedModel& learned, const std::string& model_file,
                                 const Profile& heldout, const std::string& profile_file,
                                 const ModelSpec& model, const hw::ClusterSpec& cluster);

}  // namespace paradyse::steps
