#include "real_backend/rank_timer.hpp"

#include <algorithm>
#include <chrono>

#include "common/statistics.hpp"
#include "real_backend/device.hpp"

namespace paradyse::real {

std::vector<double> max_over_ranks(Communicator& communicator, const std::vector<double>& values) {
  std::vector<double> largest;
  for (const std::vector<double>& across_ranks : gather_values(communicator, values))
    largest.push_back(*std::max_element(across_ranks.begin(), across_ranks.end()));
  return largest;
}

double median_over_ranks(Communicator& communicator, double value) {
  return median(gather_values(communicator, {value})[0]);
}

double RankTimer::median_s(const std::function<void()>& run, int batch, const std::function<void()>& untimed,
                           bool until_device) const {
  const at::Device on = device();
  communicator_.barrier();
  for (int i = 0; i < kWarmUpRuns; ++i) run();
  synchronize(on);
  std::vector<double> seconds;
  for (int i = 0; i < repeats_; ++i) {
    if (untimed) untimed();
    synchronize(on);
    communicator_.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int j = 0; j < batch; ++j) run();
    if (until_device) synchronize(on);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    seconds.push_back(std::max(elapsed.count() / batch, 1e-9));  // a curve's y must stay > 0
  }
  return max_over_ranks(communicator_, {median(std::move(seconds))})[0];
}

}  // namespace paradyse::real
