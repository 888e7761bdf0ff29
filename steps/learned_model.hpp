// The learned cost model of the paper (ParaDySe, AAAI-26, "cost models"): per (strategy, recompute),
// iteration time, peak memory and saved activation bytes per layer as functions of the sequence
// length, fitted on a profile (profile.hpp). Inside the profiled length range a random forest answers
// (50 trees of depth ≤ 10; it follows measured kinks that no low-degree curve has); beyond it, where
// a forest can only repeat its last leaf, a polynomial of degree 1–3 chosen by AIC extrapolates.
//
// Usage:
//   LearnedModel model = LearnedModel::fit(read_profile("profiles/gpt-8l.csv"));
//   model.save("models/gpt-8l.learned.json");
//   LearnedModel loaded = LearnedModel::load("models/gpt-8l.learned.json");
//   LearnedPrediction p = loaded.predict("ulysses_z", "none", 300000);  // p.extrapolated: beyond the profile
//
// Saved as one JSON file:
//   {"format": "paradyse-learned-cost-model", "version": 1, "model", "cluster", "degree", "batch", "source",
//    "entries": [{"strategy", "recompute", "min_seq", "max_seq",
//                 "targets": {"iteration_time_s" | "peak_memory_bytes" | "saved_bytes_per_layer":
//                             {"polynomial": [c0, c1, ...], "scale": [lo, hi], "forest": {XGBoost JSON}}}}]}
// The polynomial is c0 + c1·x + c2·x² + ... in x = (seq − lo) / (hi − lo), lo and hi the profiled
// range, and predicts the target itself; the forest (XGBoost's own JSON model) predicts the natural
// log of the target from the feature seq.
//
// XGBoost and Eigen stay in learned_model.cpp; this header speaks project types only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "steps/profile.hpp"

namespace paradyse::steps {

// The fewest profiled lengths a (strategy, recompute) needs: a line with AICc needs n > 4.
inline constexpr std::size_t kMinProfiledLengths = 5;

struct LearnedPrediction {
  double iteration_time_s = 0;
  double peak_memory_bytes = 0;
  double saved_bytes_per_layer = 0;
  bool extrapolated = false;  // seq outside the profiled range: the polynomial answered
};

// Immutable once fitted or loaded: copies share the fitted forests, and any number of threads may
// predict at once.
class LearnedModel {
 public:
  // Per (strategy, recompute) with at least 5 points (else InputError naming the strategy), for each
  // target: an XGBoost random forest (50 parallel trees, max depth 10, one round, rows subsampled
  // 0.8, seed 42, one thread, so the result does not depend on the machine) on the feature seq, and
  // a least-squares polynomial in seq of degree 1, 2 or 3, the one with the lowest small-sample AIC
  // (AICc, with p = degree + 2 parameters); a degree needs n > p + 1 points.
  static LearnedModel fit(const Profile& profile);

  // Writes path + ".partial", then renames it to path.
  void save(const std::string& path) const;
  // A corrupt, truncated, wrong-format or wrong-version file, or a missing or mistyped key, is an
  // InputError naming the file and the field.
  static LearnedModel load(const std::string& path);

  // Inside [min_seq, max_seq] of the entry: the forest; outside: the polynomial. Predictions are
  // clamped at >= 0 (a polynomial may dip below 0 left of the range). InputError if (strategy,
  // recompute) is not in the model.
  LearnedPrediction predict(std::string_view strategy, std::string_view recompute, int64_t seq) const;
  bool has(std::string_view strategy, std::string_view recompute) const;
  std::pair<int64_t, int64_t> profiled_range(std::string_view strategy, std::string_view recompute) const;
  // target: iteration_time_s, peak_memory_bytes or saved_bytes_per_layer.
  int polynomial_degree(std::string_view strategy, std::string_view recompute, std::string_view target) const;

  const std::string& model_name() const;
  const std::string& cluster_name() const;
  int degree() const;
  int64_t batch() const;
  const std::string& source() const;

 private:
  struct Impl;
  explicit LearnedModel(std::shared_ptr<const Impl> impl);

  std::shared_ptr<const Impl> impl_;
};

}  // namespace paradyse::steps
