#include "evaluation/simulated_times.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "common/child_processes.hpp"
#include "common/errors.hpp"
#include "strategies/sequence_layout.hpp"

namespace paradyse::evaluation {

namespace {
constexpr int64_t kDenseQuanta = 64;  // every padded length below this many quanta is a grid length
// Simulations a child process runs in turn: each child first copies the pages it writes of this
// process's memory, which costs about as much as a short simulation.
constexpr std::size_t kSimulationsPerShard = 16;
}  // namespace

SimulatedTimes::SimulatedTimes(steps::StepSimulator& simulator, int degree, int64_t batch, double ratio,
                               int jobs)
    : simulator_(simulator),
      degree_(degree),
      batch_(batch),
      ratio_(ratio),
      jobs_(jobs),
      quantum_(SequenceLayout::padded_length(1, degree, simulator.model().causal)) {
  if (jobs < 1) throw InputError("--jobs", 0, "", "expected a positive count, got " + std::to_string(jobs));
}

IterationTime SimulatedTimes::simulate(const Plan& plan, const std::vector<int64_t>& padded_documents) {
  Key key{plan, padded_documents};
  if (auto found = simulated_.find(key); found != simulated_.end()) return found->second;
  pending_.insert(key);
  if (collecting_) return {};
  run_pending();
  return simulated_.at(key);
}

void SimulatedTimes::run_pending(const std::function<void(std::size_t, std::size_t)>& progress,
                                 const std::function<bool()>& idle) {
  if (pending_.empty()) return;
  // The largest first, dealt in turn to shards of about kSimulationsPerShard: each shard's
  // simulations run one after another in one child, and the shards do not depend on `jobs`.
  std::vector<Key> keys(pending_.begin(), pending_.end());
  pending_.clear();
  const auto tokens = [](const Key& key) {
    return std::accumulate(key.second.begin(), key.second.end(), int64_t{0});
  };
  std::stable_sort(keys.begin(), keys.end(),
                   [&](const Key& a, const Key& b) { return tokens(a) > tokens(b); });
  const std::size_t shards = (keys.size() + kSimulationsPerShard - 1) / kSimulationsPerShard;
  simulator_.simulator().prepare(degree_);
  std::size_t done = 0;
  run_in_children(
      shards, jobs_,
      [&](std::size_t shard) {
        std::vector<double> times;
        for (std::size_t k = shard; k < keys.size(); k += shards) {
          const sim::SimulationResult result = simulator_.simulate(
              keys[k].first, {.degree = degree_, .batch = batch_, .documents = keys[k].second});
          times.push_back(result.iteration_time_s);
          times.push_back(result.mean_host_bound_s());
        }
        return std::string(reinterpret_cast<const char*>(times.data()), times.size() * sizeof(double));
      },
      [&](std::size_t shard, const std::string& bytes) {
        std::vector<double> times(bytes.size() / sizeof(double));
        std::memcpy(times.data(), bytes.data(), times.size() * sizeof(double));
        std::size_t t = 0;
        for (std::size_t k = shard; k < keys.size(); k += shards, t += 2) {
          PARADYSE_CHECK(t + 1 < times.size(), "a shard's simulated times from its process");
          simulated_.emplace(keys[k], IterationTime{times[t], times[t + 1]});
          ++simulations_;
          if (progress) progress(++done, keys.size());
        }
      },
      idle);
}

void SimulatedTimes::prefetch(const std::function<void()>& body,
                              const std::function<void(std::size_t, std::size_t)>& progress,
                              const std::function<bool()>& idle) {
  collecting_ = true;
  try {
    body();
  } catch (...) {
    collecting_ = false;
    pending_.clear();
    throw;
  }
  collecting_ = false;
  run_pending(progress, idle);
}

IterationTime SimulatedTimes::time(const Plan& plan, const std::vector<int64_t>& cost_key,
                                   double analytic_ratio) {
  PARADYSE_CHECK(cost_key.size() > 1, "a packed micro-batch has several documents");
  if (ratio_ <= 1) return simulate(plan, cost_key);
  if (auto found = simulated_.find({plan, cost_key}); found != simulated_.end()) return found->second;
  const IterationTime sequence = time(plan, std::accumulate(cost_key.begin(), cost_key.end(), int64_t{0}));
  if (collecting_) return {};
  ++scaled_;
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
  if (collecting_) return {};
  const double share = static_cast<double>(units - low) / static_cast<double>(high - low);
  const IterationTime time{t_low.seconds + (t_high.seconds - t_low.seconds) * share,
                           t_low.host_bound_s + (t_high.host_bound_s - t_low.host_bound_s) * share};
  interpolated_.emplace(std::make_pair(plan, std::vector<int64_t>{padded_tokens}), time.seconds);
  return time;
}

PercentageErrors SimulatedTimes::measure_error(int samples) {
  PercentageErrors error;
  if (interpolated_.empty() || samples <= 0) return error;
  const std::vector<std::pair<Key, double>> all(interpolated_.begin(), interpolated_.end());
  const auto count = std::min<std::size_t>(static_cast<std::size_t>(samples), all.size());
  prefetch([&] {
    for (std::size_t i = 0; i < count; ++i) {
      const Key& key = all[i * all.size() / count].first;
      simulate(key.first, key.second);
    }
  });
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
