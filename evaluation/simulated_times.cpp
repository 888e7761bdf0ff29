#include "evaluation/simulated_times.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "strategies/sequence_layout.hpp"

namespace paradyse::evaluation {

namespace {
constexpr int64_t kDenseQuanta = 64;  // every padded length below this many quanta is a grid length
}

SimulatedTimes::SimulatedTimes(steps::StepSimulator& simulator, int degree, int64_t batch, double ratio)
    : simulator_(simulator),
      degree_(degree),
      batch_(batch),
      ratio_(ratio),
      quantum_(SequenceLayout::padded_length(1, degree, simulator.model().causal)) {}

IterationTime SimulatedTimes::simulate(const Plan& plan, const std::vector<int64_t>& padded_documents) {
  auto key = std::make_pair(plan, padded_documents);
  if (auto found = simulated_.find(key); found != simulated_.end()) return found->second;
  ++simulations_;
  const sim::SimulationResult result =
      simulator_.simulate(plan, {.degree = degree_, .batch = batch_, .documents = padded_documents});
  return simulated_
      .emplace(std::move(key), IterationTime{result.iteration_time_s, result.mean_host_bound_s()})
      .first->second;
}

IterationTime SimulatedTimes::time(const Plan& plan, const std::vector<int64_t>& cost_key,
                                   double analytic_ratio) {
  PARADYSE_CHECK(cost_key.size() > 1, "a packed micro-batch has several documents");
  if (ratio_ <= 1) return simulate(plan, cost_key);
  if (auto found = simulated_.find({plan, cost_key}); found != simulated_.end()) return found->second;
  ++scaled_;
  const IterationTime sequence = time(plan, std::accumulate(cost_key.begin(), cost_key.end(), int64_t{0}));
  const IterationTime scaled{sequence.seconds * analytic_ratio, sequence.host_bound_s * analytic_ratio};
  interpolated_.emplace(std::make_pair(plan, cost_key), scaled.seconds);
  return scaled;
}

IterationTime SimulatedTimes::time(const Plan& plan, int64_t padded_tokens) {
  const int64_t units = padded_tokens / quantum_;
  if (ratio_ <= 1 || units <= kDenseQuanta) return simulate(plan, {padded_tokens});
  // The grid lengths around `units`: round(64·ratio^k) quanta.
  const auto grid = [&](double k) {
    return static_cast<int64_t>(std::llround(kDenseQuanta * std::pow(ratio_, k)));
  };
  double k = std::floor(std::log(static_cast<double>(units) / kDenseQuanta) / std::log(ratio_));
  while (grid(k) > units) --k;
  while (grid(k + 1) <= units) ++k;
  const int64_t low = grid(k), high = grid(k + 1);
  if (low == units) return simulate(plan, {padded_tokens});
  const IterationTime t_low = simulate(plan, {low * quantum_}), t_high = simulate(plan, {high * quantum_});
  const double share = static_cast<double>(units - low) / static_cast<double>(high - low);
  const IterationTime time{t_low.seconds + (t_high.seconds - t_low.seconds) * share,
                           t_low.host_bound_s + (t_high.host_bound_s - t_low.host_bound_s) * share};
  interpolated_.emplace(std::make_pair(plan, std::vector<int64_t>{padded_tokens}), time.seconds);
  return time;
}

PercentageErrors SimulatedTimes::measure_error(int samples) {
  PercentageErrors error;
  if (interpolated_.empty() || samples <= 0) return error;
  const std::vector<std::pair<std::pair<Plan, std::vector<int64_t>>, double>> all(interpolated_.begin(),
                                                                                  interpolated_.end());
  const auto count = std::min<std::size_t>(static_cast<std::size_t>(samples), all.size());
  for (std::size_t i = 0; i < count; ++i) {
    const auto& [key, interpolated] = all[i * all.size() / count];
    error.add(interpolated, simulate(key.first, key.second).seconds);
  }
  return error;
}

std::string SimulatedTimes::method() const {
  if (ratio_ <= 1) return "every (plan, padded documents) simulated once and reused";
  std::string text = fmt::format(
      "every (plan, length) simulated once and reused, on a grid of lengths: every padded length up to {} "
      "tokens, "
      "then lengths {:.0f} % apart, with times read off the line between the two grid lengths around a "
      "sequence",
      kDenseQuanta * quantum_, (ratio_ - 1) * 100);
  if (scaled_ > 0)
    text +=
        "; a packed micro-batch takes the time of one sequence of its padded length times the analytic "
        "model's ratio of the two";
  return text;
}

}  // namespace paradyse::evaluation
