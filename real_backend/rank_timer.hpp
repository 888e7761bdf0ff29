// Timing a piece of work as all ranks of a group run it together, for calibrate's component
// measurements and for the machine-speed reference that validate re-times.
#pragma once

#include <functional>
#include <vector>

#include "real_backend/communicator.hpp"

namespace paradyse::real {

// The largest of each rank's value, on every rank.
std::vector<double> max_over_ranks(Communicator& communicator, const std::vector<double>& values);
// The median of every rank's `value`; the same on every rank, so ranks also agree on when to stop.
double median_over_ranks(Communicator& communicator, double value);

// A barrier lines the ranks up before each repetition, so that they contend for cores and memory as
// they do in training. Untimed warm-up runs first (first touch of memory, thread pools, Gloo's
// buffers), three of them as a step's temporaries are warm by its third run: after one, the largest
// size of a call whose temporaries are new memory sometimes timed 4–8× slow (softmax_backward on
// 16.7M-element blocks: 0.33–0.49 GB/s in three of four calibrations, against 3.0–3.5 GB/s after
// three, and 72 ms a call inside a step). A repetition of a short piece runs it `batch` times back to
// back and keeps the mean, as nccl-tests does: a single short run is below the clock's resolution,
// or, for a collective, often delayed by a whole scheduler tick (milliseconds) while the ranks'
// threads share the cores, which would make the median of single runs a coin toss.
//
// On a GPU a repetition ends when the device has run what it queued (every stream), unless the timer
// times the host's issue alone (`until_device`), as for what a call costs the thread that makes it.
//
// The result is the slowest rank's median: ranks meet at every collective of a step, so a step runs
// at the pace of its slowest rank. On a machine whose cores run at different speeds (a virtual
// machine's vCPUs share their host's cores with other tenants; on this project's development VM one
// vCPU ran 10–20 % slower than the other for minutes at a time) the median over ranks would price
// every op at the faster ranks' pace.
class RankTimer {
 public:
  static constexpr int kWarmUpRuns = 3;

  RankTimer(Communicator& communicator, int repeats) : communicator_(communicator), repeats_(repeats) {}

  // `untimed` runs before each repetition (and before the barrier).
  double median_s(const std::function<void()>& run, int batch = 1, const std::function<void()>& untimed = {},
                  bool until_device = true) const;
  at::Device device() const { return communicator_.device(); }

 private:
  Communicator& communicator_;
  int repeats_;
};

}  // namespace paradyse::real
