#include "real_backend/calibration.hpp"

#include "common/attention_flops.hpp"
#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/limits.hpp"
#include "common/statistics.hpp"
#include "common/units.hpp"
#include "real_backend/device.hpp"
#include "real_backend/kernel_probes.hpp"
#include "real_backend/machine_speed.hpp"
#include "real_backend/rank_timer.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

namespace paradyse::real {
namespace {

using OrderedJson = nlohmann::ordered_json;
using Points = MeasuredCurve;  // a curve's [x, y], x increasing

// GEMM points grow until the next one would take longer than this for a single run (GEMM time grows
// 8× per doubling of n), so they take seconds; attention is timed at every length it will be priced
// at, since its curve is clamped beyond its last point.
constexpr double kGemmPointSeconds = 0.3;
// Buffer sizes, in bytes as integers.
constexpr auto kMiBytes = static_cast<int64_t>(kMiB);

// Tensors of `type` on the device the timer's ranks run on.
at::TensorOptions on(const RankTimer& timer, at::ScalarType type = at::kFloat) {
  return at::TensorOptions(type).device(timer.device());
}

// FLOP/s of at::mm on square n×n matrices of `type`, by the GEMM's 2n³ FLOPs, up to 2048 on a CPU and
// 16384 on a GPU, whose GEMMs reach their peak only past the shapes of a small model's layers.
Points gemm_flops_per_second(const RankTimer& timer, at::ScalarType type) {
  Points points;
  const int64_t largest = timer.device().is_cuda() ? 16384 : 2048;
  for (int64_t n = 64; n <= largest; n *= 2) {
    const at::Tensor a = at::randn({n, n}, on(timer)).to(type), b = at::randn({n, n}, on(timer)).to(type);
    at::Tensor c = at::empty({n, n}, a.options());
    const double seconds = timer.median_s([&] { at::mm_out(c, a, b); });
    const double flops = 2.0 * static_cast<double>(n * n * n);
    points.emplace_back(flops, flops / seconds);
    if (8 * seconds > kGemmPointSeconds) break;
  }
  return points;
}

// FLOP/s of TorchBackend's attention forward + backward (what runs for real), or of its forward alone,
// on one sequence of s tokens, by s. FLOPs as the tracer counts them (common/attention_flops.hpp).
Points attention_flops_per_second(const RankTimer& timer, TorchBackend& backend, const AttentionShape& shape,
                                  bool causal, int64_t max_tokens, AttentionPass pass) {
  const double passes = pass == AttentionPass::forward ? 1 : 1 + kAttentionBackwardFlopsPerForward;
  Points points;
  for (int64_t s = std::min<int64_t>(128, max_tokens);; s = std::min(2 * s, max_tokens)) {
    const Positions sequence{TokenRange{0, s}};
    const AttentionMask mask{causal, sequence, sequence, nullptr};
    const double seconds = attention_pass_s(timer, backend, shape, causal, s, pass);
    const double flops = passes * kAttentionForwardFlopsPerPairDim *
                         static_cast<double>(shape.heads * shape.head_dim) * mask.computed_pairs();
    points.emplace_back(static_cast<double>(s), flops / seconds);
    if (s == max_tokens) break;
  }
  return points;
}

struct KernelPoints {
  Kernel kernel;
  bool by_flops;
  Points rate_by_size;  // size as the tracer counts it (FLOPs or bytes), and size per second
};

// Each probed backend call timed at each of its sizes on the real backend, its size read off the
// same call on the tracer. A short call repeats back to back so that one repetition lasts about a
// millisecond (the RankTimer's reasons; ranks agree on the count), from the caches as in a step where
// its inputs were just made; a cold one runs once per repetition after the caches are flushed.
std::vector<KernelPoints> kernel_rates(Communicator& communicator, const RankTimer& timer,
                                       TorchBackend& backend, const ModelSpec& model, int64_t max_tokens,
                                       double fixed_s) {
  const int degree = communicator.size();
  // Written before each repetition of a cold call: larger than any CPU's last-level cache or GPU's L2.
  at::Tensor cache_flush = at::empty({256 * kMiBytes / 4}, on(timer));
  std::vector<KernelPoints> rates;
  for (const KernelProbe& probe : kernel_probes(model, degree, max_tokens)) {
    KernelPoints& kernel =
        rates.emplace_back(KernelPoints{probe.kernel, call_info(probe.kernel).size == CallSize::flops, {}});
    for (int point = 0;; ++point) {
      const std::optional<double> size = traced_size(probe, point, degree);
      if (!size) break;
      const KernelCall call = probe.prepare(backend, point);
      double seconds = 0;
      if (probe.cold) {
        seconds = timer.median_s(call, 1, [&] { cache_flush.fill_(1.0F); });
      } else {
        const auto start = std::chrono::steady_clock::now();
        call();
        synchronize(timer.device());
        const std::chrono::duration<double> once = std::chrono::steady_clock::now() - start;
        const double typical_s = median_over_ranks(communicator, once.count());
        const int batch = static_cast<int>(std::clamp(1e-3 / std::max(typical_s, 1e-9), 1.0, 100.0));
        seconds = timer.median_s(call, batch);
      }
      // An op's fixed cost is priced apart (the host block, or the kernel's launch): the rate is of the rest.
      kernel.rate_by_size.emplace_back(*size, *size / std::max(seconds - fixed_s, 1e-9));
    }
  }
  return rates;
}

// Bytes read and written per second by a 64 MiB copy: the rate memory-bound ops stream at.
double copy_bytes_per_second(const RankTimer& timer) {
  const at::Tensor source = at::rand({64 * kMiBytes / 4}, on(timer));
  at::Tensor target = at::empty_like(source);
  const double seconds = timer.median_s([&] { target.copy_(source); });
  return 2.0 * static_cast<double>(source.nbytes()) / seconds;
}

// Bytes per second of a 256 MiB copy between pinned host memory and the GPU, on a copy stream as
// activation offload runs it: the slower of the two directions, with every rank of the machine
// copying at once (GPUs behind one PCIe switch share its uplink). Zero on a CPU, whose device memory
// is the host's.
double host_link_bytes_per_second(const RankTimer& timer, const at::Device& device) {
  if (!device.is_cuda()) return 0;
  CopyStream copies(device);
  const int64_t bytes = 256 * kMiBytes;
  const at::Tensor host = copies.host_bytes(bytes);
  const at::Tensor on_device = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device));
  double slowest_s = 0;
  for (const auto& [to, from] : {std::pair{on_device, host}, std::pair{host, on_device}})
    slowest_s = std::max(slowest_s, timer.median_s([&, &to = to, &from = from] {
      copies.copy(to, from);
      copies.wait();
    }));
  return static_cast<double>(bytes) / slowest_s;
}

// The fixed cost of one op to the host that issues it (its dispatch): an add of two 1-element
// tensors, until the call returns (on a GPU the kernel runs later).
double op_overhead_s(const RankTimer& timer) {
  const at::Tensor a = at::ones({1}, on(timer)), b = at::ones({1}, on(timer));
  return timer.median_s([&] { at::add(a, b); }, 100, {}, /*until_device=*/false);
}

// On a GPU, the device's fixed cost of one kernel: the time between events around 100 adds of
// 1-element tensors queued behind a GEMM that keeps the stream busy while the host issues them, so
// that the device runs them back to back. 0 on CPU, where the host's dispatch is an op's fixed cost.
double kernel_launch_s(Communicator& communicator, const RankTimer& timer) {
  if (!timer.device().is_cuda()) return 0;
  const at::Tensor a = at::ones({1}, on(timer)), b = at::ones({1}, on(timer));
  const at::Tensor big = at::randn({8192, 8192}, on(timer, at::kBFloat16));
  constexpr int kAdds = 100;
  DeviceClock clock(timer.device());
  std::vector<double> samples;
  for (int repeat = 0; repeat < 5; ++repeat) {
    for (int i = 0; i < 4; ++i) at::mm(big, big);  // milliseconds: the adds queue behind them
    const DeviceClock::Stamp start = clock.stamp();
    for (int i = 0; i < kAdds; ++i) at::add(a, b);
    const DeviceClock::Stamp end = clock.stamp();
    samples.push_back((clock.seconds(end) - clock.seconds(start)) / kAdds);
  }
  return max_over_ranks(communicator, {median(std::move(samples))})[0];
}

struct Fabric {
  Points bus_bandwidth;  // all-reduce bus bandwidth by message bytes
  // All-gather and reduce-scatter bus bandwidth by the collective's bytes, in the step's element type.
  Points all_gather_bus_bandwidth, reduce_scatter_bus_bandwidth;
  Points send_recv_bandwidth;  // bytes a rank sends per second as a ring's step, by those bytes; p > 1
  double latency_s = 0;
  double all_to_all_bus_bandwidth = 0;  // at the largest size
};

// The sizes collectives are timed at: 1 KiB, 4 KiB, ... up to `largest_bytes`.
std::vector<int64_t> collective_sizes(int64_t largest_bytes) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = 1024; bytes <= largest_bytes; bytes *= 4) sizes.push_back(bytes);
  PARADYSE_CHECK(!sizes.empty(), "collectives timed up to at least 1 KiB");
  return sizes;
}

// The collectives between the ranks, in nccl-tests' bus bandwidth: 2(p−1)/p·size/time for the
// all-reduce, (p−1)/p·size/time for the all-gather, reduce-scatter and all-to-all. With one rank
// nothing moves; size/time then stands in so that the figures stay positive. The all-gather and
// reduce-scatter run as a step runs them, in its element type (`dtype`) through the communicator's
// own implementation (on Gloo the reduce-scatter is an all-to-all and a sum in float32).
Fabric measure_fabric(Communicator& communicator, const RankTimer& timer, at::ScalarType dtype,
                      int64_t largest_bytes) {
  const at::TensorOptions of_step = on(timer, dtype);
  const double p = communicator.size();
  const double all_reduce_share = p > 1 ? 2 * (p - 1) / p : 1;
  const double all_to_all_share = p > 1 ? (p - 1) / p : 1;
  const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
  // Small collectives are timed 10 back to back: one alone is below the clock's resolution.
  const auto repetitions = [](int64_t bytes) { return bytes < 4 * kMiBytes ? 10 : 1; };
  auto all_gather_s = [&](int64_t bytes) {  // `bytes` gathered: every rank's 1/p of them
    const at::Tensor input = at::zeros({bytes / element / communicator.size()}, of_step);
    at::Tensor output = at::empty({input.numel() * communicator.size()}, of_step);
    return timer.median_s([&] { communicator.all_gather(input, output)->wait(); }, repetitions(bytes));
  };
  auto reduce_scatter_s = [&](int64_t bytes) {  // `bytes` reduced: every rank keeps 1/p of them
    const at::Tensor input =
        at::zeros({bytes / element / communicator.size() * communicator.size()}, of_step);
    at::Tensor output = at::empty({input.numel() / communicator.size()}, of_step);
    return timer.median_s([&] { communicator.reduce_scatter(input, output)->wait(); }, repetitions(bytes));
  };
  auto all_reduce_s = [&](int64_t bytes) {
    at::Tensor buffer = at::zeros({bytes / 4}, on(timer));
    return timer.median_s([&] { communicator.all_reduce(buffer)->wait(); }, repetitions(bytes));
  };
  // Every rank sends to the next and receives from the one before, as a ring attention's step does.
  auto send_recv_s = [&](int64_t bytes) {
    const at::Tensor send = at::zeros({bytes / element}, of_step);
    at::Tensor recv = at::empty_like(send);
    const int rank = communicator.rank(), size = communicator.size();
    return timer.median_s(
        [&] { communicator.send_recv(send, (rank + 1) % size, recv, (rank + size - 1) % size)->wait(); },
        repetitions(bytes));
  };
  Fabric fabric;
  fabric.latency_s = all_reduce_s(4);
  const std::vector<int64_t> sizes = collective_sizes(largest_bytes);
  const int64_t largest = sizes.back();
  for (const int64_t bytes : sizes) {
    const double size = static_cast<double>(bytes);
    fabric.bus_bandwidth.emplace_back(size, all_reduce_share * size / all_reduce_s(bytes));
    fabric.all_gather_bus_bandwidth.emplace_back(size, all_to_all_share * size / all_gather_s(bytes));
    fabric.reduce_scatter_bus_bandwidth.emplace_back(size, all_to_all_share * size / reduce_scatter_s(bytes));
    if (p > 1) fabric.send_recv_bandwidth.emplace_back(size, size / send_recv_s(bytes));
  }
  // all_to_all needs p equal chunks.
  const at::Tensor input = at::zeros({largest / 4 / communicator.size() * communicator.size()}, on(timer));
  at::Tensor output = at::empty_like(input);
  const double seconds = timer.median_s([&] { communicator.all_to_all(input, output)->wait(); });
  fabric.all_to_all_bus_bandwidth = all_to_all_share * static_cast<double>(input.nbytes()) / seconds;
  return fabric;
}

// Busy compute for the measurements of collectives beside or between compute: square GEMMs in the
// step's element type, and the time of one (the slowest rank's, so that every rank runs as many and
// every rank picks the same size). As large as kBusyGemmSize, halved while one takes longer than
// `longest_s`: so that a chain's compute comes to the length it is meant to have. (A CPU without bf16
// units runs bf16 GEMMs at a few GFLOP/s: on this project's development VM one of 512 took 70 ms,
// and every chain meant to compute 1, 4 or 16 ms between collectives computed 70.)
constexpr int64_t kBusyGemmSize = 512;
class BusyGemms {
 public:
  BusyGemms(const RankTimer& timer, at::ScalarType dtype, double longest_s) {
    for (int64_t size = kBusyGemmSize;; size /= 2) {
      a_ = at::randn({size, size}, on(timer)).to(dtype);
      b_ = at::randn({size, size}, on(timer)).to(dtype);
      c_ = at::empty({size, size}, a_.options());
      one_s_ = timer.median_s([this] { run(1); });
      if (one_s_ <= longest_s || size <= kSmallestSize) break;
    }
  }
  void run(int count) {
    for (int i = 0; i < count; ++i) at::mm_out(c_, a_, b_);
  }
  double one_s() const { return one_s_; }
  int64_t size() const { return a_.size(0); }

 private:
  static constexpr int64_t kSmallestSize = 16;
  at::Tensor a_, b_, c_;
  double one_s_ = 0;
};

// The share of a rank's compute that a collective in flight beside it takes (on a CPU, Gloo's threads
// run on the cores the ranks compute on). GEMMs that alone take about twice an all-gather run while
// it is in flight; a compute stream slowed by `share` while the collective runs takes
// gemms_s + share · gather_s in all (the collective itself not slowed), so
// share = (together_s − gemms_s) / gather_s.
// A figure measured beside or between busy GEMMs, and their size.
struct BesideGemms {
  double value = 0;
  int64_t gemm_size = 0;
};

BesideGemms measured_compute_contention(Communicator& communicator, const RankTimer& timer,
                                        at::ScalarType dtype) {
  const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
  const at::Tensor input = at::zeros({16 * kMiBytes / element / communicator.size()}, on(timer, dtype));
  at::Tensor output = at::empty({input.numel() * communicator.size()}, on(timer, dtype));
  const double gather_s = timer.median_s([&] { communicator.all_gather(input, output)->wait(); });
  // Of at most a tenth of the gather each, so that together they take about twice it.
  BusyGemms busy(timer, dtype, gather_s / 10);
  const int gemms = static_cast<int>(std::clamp(std::ceil(2 * gather_s / busy.one_s()), 1.0, 10000.0));
  auto run_gemms = [&] { busy.run(gemms); };
  const double gemms_s = timer.median_s(run_gemms);
  const double together_s = timer.median_s([&] {
    const std::unique_ptr<Work> gather = communicator.all_gather(input, output);
    run_gemms();
    gather->wait();
  });
  return {std::clamp((together_s - gemms_s) / gather_s, 0.0, 1.0), busy.size()};
}

// The size of a rank's buffers when collectives are timed as a step issues them. Gloo's send writes
// its bytes on the calling thread, and its all-reduce prepares on it: on this
// project's development VM a send_recv took 42, 118 and 740 µs to return at 16 KiB, 256 KiB and
// 4 MiB, an all-reduce 36, 77 and 585 µs, the others 12–78 µs. One size stands for all: the
// middle one, a few hundred KiB as a short sequence's activations on a rank are.
constexpr int64_t kIssueBytes = 256 * 1024;

// Each kind of collective and transfer a step issues, on buffers of `bytes` a rank, by name.
class StepCollectives {
 public:
  using Issue = std::function<std::unique_ptr<Work>()>;

  StepCollectives(Communicator& communicator, at::ScalarType dtype, int64_t bytes)
      : input_(at::zeros({bytes / static_cast<int64_t>(c10::elementSize(dtype)) / communicator.size() *
                          communicator.size()},
                         at::TensorOptions(dtype).device(communicator.device()))),
        gathered_(at::empty({input_.numel() * communicator.size()}, input_.options())),
        scattered_(at::empty({input_.numel() / communicator.size()}, input_.options())),
        exchanged_(at::empty_like(input_)),
        reduced_(input_.clone()) {
    const int p = communicator.size(), rank = communicator.rank();
    Communicator& c = communicator;
    kinds_ = {{"all_gather", [&c, this] { return c.all_gather(input_, gathered_); }},
              {"reduce_scatter", [&c, this] { return c.reduce_scatter(input_, scattered_); }},
              {"all_reduce", [&c, this] { return c.all_reduce(reduced_); }},
              {"all_to_all", [&c, this] { return c.all_to_all(input_, exchanged_); }}};
    // A lone rank has no peer to exchange with (Gloo connects no rank to itself), and a step of one
    // rank sends nothing.
    if (p > 1)
      kinds_.emplace_back("send_recv", [&c, this, p, rank] {
        return c.send_recv(input_, (rank + 1) % p, exchanged_, (rank + p - 1) % p);
      });
  }
  StepCollectives(const StepCollectives&) = delete;
  StepCollectives& operator=(const StepCollectives&) = delete;

  const std::vector<std::pair<std::string, Issue>>& kinds() const { return kinds_; }

 private:
  at::Tensor input_, gathered_, scattered_, exchanged_, reduced_;
  std::vector<std::pair<std::string, Issue>> kinds_;
};

// What issuing each kind of collective or transfer costs a rank's thread: the backend's call until
// it returns, every rank at once after a barrier, its wait untimed, on kIssueBytes a rank.
std::map<std::string, double> communication_issue_s(Communicator& communicator, const RankTimer& timer,
                                                    at::ScalarType dtype) {
  const StepCollectives collectives(communicator, dtype, kIssueBytes);
  std::vector<std::unique_ptr<Work>> in_flight;
  const auto wait_all = [&] {
    for (const std::unique_ptr<Work>& work : in_flight) work->wait();
    in_flight.clear();
  };
  std::map<std::string, double> seconds;
  for (const auto& [kind, issue] : collectives.kinds()) {
    seconds[kind] = timer.median_s([&, &issue = issue] { in_flight.push_back(issue()); }, 1, wait_all,
                                   /*until_device=*/false);
    wait_all();
  }
  return seconds;
}

// The compute a step runs between two collectives: from under a millisecond (a layer's small GEMMs)
// to seconds (long attention).
constexpr std::array<double, 4> kComputeBetweenSeconds{1e-3, 4e-3, 16e-3, 64e-3};

// What a collective takes beyond its own time when the ranks reach it from computing, as a step's
// ranks do, rather than back to back: every rank runs GEMMs for a while and then a collective, over
// and over with no barrier between, and the chain's time less its GEMMs' is set against the same
// collectives back to back. The ranks arrive apart (their compute's own jitter), and Gloo's threads,
// asleep while the rank computed, wake on the cores the ranks compute on: on this project's
// development VM a 256 KiB collective took 0.3–0.5 ms back to back and 1.0–2.5 ms in such a chain
// (more after longer compute; a tenth of them over 3 ms). The chain's compute takes each of
// kComputeBetweenSeconds in turn, and the figure is the mean over them; the collectives cycle through
// a step's kinds (StepCollectives) at kIssueBytes. Means, not medians: a step pays the long tail too.
// As every figure, the slowest rank's: its GEMMs (the model's compute is the slowest rank's) and its
// chain (ranks that meet at every collective finish the chain together).
// On a GPU the host does not wait for collectives, so the chain would time their issue alone: not
// measured there (0).
BesideGemms measured_synchronization_s(Communicator& communicator, const RankTimer& timer,
                                       at::ScalarType dtype) {
  if (communicator.size() == 1 || communicator.device().is_cuda()) return {};
  const StepCollectives collectives(communicator, dtype, kIssueBytes);
  const std::size_t kinds = collectives.kinds().size();
  const auto collective = [&](std::size_t i) { collectives.kinds()[i % kinds].second()->wait(); };
  // Of at most a quarter of the shortest compute between collectives.
  BusyGemms busy(timer, dtype, kComputeBetweenSeconds.front() / 4);
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  // A collective's time back to back: the mean over twenty rounds of the kinds.
  const std::size_t back_to_back = 20 * kinds;
  for (std::size_t i = 0; i < kinds; ++i) collective(i);  // warm
  communicator.barrier();
  const Clock::time_point baseline = Clock::now();
  for (std::size_t i = 0; i < back_to_back; ++i) collective(i);
  const double alone_s =
      max_over_ranks(communicator, {seconds_since(baseline)})[0] / static_cast<double>(back_to_back);
  double extra_s = 0;
  for (double compute_s : kComputeBetweenSeconds) {
    const int gemms = std::max(1, static_cast<int>(std::lround(compute_s / busy.one_s())));
    // A quarter of a second of compute, at least four rounds of the kinds.
    const std::size_t count = kinds * static_cast<std::size_t>(std::max(
                                          4L, std::lround(0.25 / compute_s / static_cast<double>(kinds))));
    communicator.barrier();
    double gemms_s = 0;
    const Clock::time_point start = Clock::now();
    for (std::size_t i = 0; i < count; ++i) {
      const Clock::time_point compute = Clock::now();
      busy.run(gemms);
      gemms_s += seconds_since(compute);
      collective(i);
    }
    const std::vector<double> slowest = max_over_ranks(communicator, {seconds_since(start), gemms_s});
    extra_s += (slowest[0] - slowest[1]) / static_cast<double>(count) - alone_s;
  }
  return {std::max(0.0, extra_s / static_cast<double>(kComputeBetweenSeconds.size())), busy.size()};
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Four significant digits: measurements are not more precise than that, and the file stays readable.
double rounded(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return std::stod(text);
}

// The all-to-all's bus bandwidth over the all-reduce's, in (0, 1].
double fraction(double value) {
  return std::clamp(rounded(value), 1e-4, 1.0);
}

// [[x, y], ...] with x strictly increasing (a point that is not is dropped) and y = f(y).
template <class F>
OrderedJson curve(const Points& points, F&& f) {
  OrderedJson json = OrderedJson::array();
  double last_x = 0;
  for (const auto& [x, y] : points) {
    if (x <= last_x) continue;
    json.push_back({static_cast<int64_t>(x), f(y)});
    last_x = x;
  }
  return json;
}

double peak(const Points& points) {
  double best = 0;
  for (const auto& [x, y] : points) best = std::max(best, y);
  return best;
}

// How far the machine's speed moved over `reference_s`: the slowest over the fastest, − 1.
double spread(const std::vector<double>& reference_s) {
  const auto [fastest, slowest] = std::minmax_element(reference_s.begin(), reference_s.end());
  return *slowest / *fastest - 1;
}

// "the machine's speed moved 12 % during the calibration (speed reference 0.081, 0.090, 0.083,
// 0.085 s; steady: at most 10 %)"
std::string unsteady_text(const std::vector<double>& reference_s, double steady) {
  std::string times;
  for (double t : reference_s) {
    char text[32];
    std::snprintf(text, sizeof text, "%s%.3f", times.empty() ? "" : ", ", t);
    times += text;
  }
  char text[96];
  std::snprintf(text, sizeof text, " s; steady: at most %.0f %%)", 100 * steady);
  return "the machine's speed moved " + std::to_string(std::lround(100 * spread(reference_s))) +
         " % during the calibration (speed reference " + times + text;
}

// measure_once's groups of figures, in order, each between two timings of the speed reference.
constexpr std::array<const char*, 3> kGroupNames{"GEMM and attention", "kernels and copy", "collectives"};

// Everything calibrate measures, in one pass over the machine, and the speed reference timed before,
// between and after its groups of figures.
struct Measurements {
  Points gemm, attention, causal, attention_forward, causal_forward;
  double dispatch_s = 0;  // the host's, per op
  double launch_s = 0;    // the device's, per kernel (GPU)
  std::vector<KernelPoints> kernels;
  double copy = 0;
  double host_link = 0;  // bytes/s each way between pinned host memory and the GPU; 0 on a CPU
  Fabric fabric;
  BesideGemms contention;
  BesideGemms synchronization_s;
  std::map<std::string, double> issue_s;  // by communication kind
  std::vector<double> reference_s;
};

double median_of(const std::vector<Measurements>& passes,
                 const std::function<double(const Measurements&)>& f) {
  std::vector<double> values;
  for (const Measurements& m : passes) values.push_back(f(m));
  return median(std::move(values));
}

// The median curve of the passes (the GEMM curve stops where a point grows too long, which may
// differ by pass: the points every pass measured).
Points median_of(const std::vector<Measurements>& passes,
                 const std::function<const Points&(const Measurements&)>& f) {
  std::vector<Points> curves;
  for (const Measurements& m : passes) curves.push_back(f(m));
  return median_curve(curves);
}

// Each figure the median of its group's passes (`kept`, by group: passes_at_speed's order of groups).
Measurements median_of(const std::vector<Measurements>& passes, const std::vector<std::vector<int>>& kept) {
  const auto group = [&](std::size_t g) {
    std::vector<Measurements> of_group;
    for (int pass : kept[g]) of_group.push_back(passes[static_cast<std::size_t>(pass)]);
    return of_group;
  };
  const std::vector<Measurements> compute = group(0), host = group(1), fabric = group(2);
  Measurements m;
  m.gemm = median_of(compute, [](const Measurements& p) -> const Points& { return p.gemm; });
  m.attention = median_of(compute, [](const Measurements& p) -> const Points& { return p.attention; });
  m.causal = median_of(compute, [](const Measurements& p) -> const Points& { return p.causal; });
  m.attention_forward =
      median_of(compute, [](const Measurements& p) -> const Points& { return p.attention_forward; });
  m.causal_forward =
      median_of(compute, [](const Measurements& p) -> const Points& { return p.causal_forward; });
  m.dispatch_s = median_of(host, [](const Measurements& p) { return p.dispatch_s; });
  m.launch_s = median_of(host, [](const Measurements& p) { return p.launch_s; });
  m.kernels = host.front().kernels;
  for (std::size_t k = 0; k < m.kernels.size(); ++k)
    m.kernels[k].rate_by_size =
        median_of(host, [k](const Measurements& p) -> const Points& { return p.kernels[k].rate_by_size; });
  m.copy = median_of(host, [](const Measurements& p) { return p.copy; });
  m.host_link = median_of(host, [](const Measurements& p) { return p.host_link; });
  m.fabric.bus_bandwidth =
      median_of(fabric, [](const Measurements& p) -> const Points& { return p.fabric.bus_bandwidth; });
  m.fabric.all_gather_bus_bandwidth = median_of(
      fabric, [](const Measurements& p) -> const Points& { return p.fabric.all_gather_bus_bandwidth; });
  m.fabric.reduce_scatter_bus_bandwidth = median_of(
      fabric, [](const Measurements& p) -> const Points& { return p.fabric.reduce_scatter_bus_bandwidth; });
  m.fabric.send_recv_bandwidth =
      median_of(fabric, [](const Measurements& p) -> const Points& { return p.fabric.send_recv_bandwidth; });
  m.fabric.latency_s = median_of(fabric, [](const Measurements& p) { return p.fabric.latency_s; });
  m.fabric.all_to_all_bus_bandwidth =
      median_of(fabric, [](const Measurements& p) { return p.fabric.all_to_all_bus_bandwidth; });
  // Every pass picks its GEMMs' size; the first's names them.
  m.contention = {median_of(fabric, [](const Measurements& p) { return p.contention.value; }),
                  fabric.front().contention.gemm_size};
  m.synchronization_s = {median_of(fabric, [](const Measurements& p) { return p.synchronization_s.value; }),
                         fabric.front().synchronization_s.gemm_size};
  for (const auto& [kind, seconds] : fabric.front().issue_s)
    m.issue_s[kind] = median_of(fabric, [&kind = kind](const Measurements& p) { return p.issue_s.at(kind); });
  return m;
}

Measurements measure_once(Communicator& communicator, const RankTimer& timer, TorchBackend& backend,
                          const ModelSpec& model, const CalibrationOptions& options) {
  Measurements m;
  const auto reference = [&] { m.reference_s.push_back(reference_seconds(communicator, backend, model)); };
  // Compute, on every rank at once.
  reference();
  m.gemm = gemm_flops_per_second(timer, backend.storage_type(DType::bf16));
  const AttentionShape shape = local_attention_shape(model, communicator.size());
  const int64_t longest = options.max_attention_tokens;
  m.attention =
      attention_flops_per_second(timer, backend, shape, false, longest, AttentionPass::forward_backward);
  m.causal =
      attention_flops_per_second(timer, backend, shape, true, longest, AttentionPass::forward_backward);
  m.attention_forward =
      attention_flops_per_second(timer, backend, shape, false, longest, AttentionPass::forward);
  m.causal_forward = attention_flops_per_second(timer, backend, shape, true, longest, AttentionPass::forward);
  reference();
  m.dispatch_s = op_overhead_s(timer);
  m.launch_s = kernel_launch_s(communicator, timer);
  // An op's fixed cost: on a GPU the kernel's launch (the host's dispatch overlaps the device's work);
  // on a CPU, whose ops are synchronous, the host's dispatch.
  const double fixed_s = communicator.device().is_cuda() ? m.launch_s : m.dispatch_s;
  m.kernels = kernel_rates(communicator, timer, backend, model, longest, fixed_s);
  m.copy = copy_bytes_per_second(timer);
  m.host_link = host_link_bytes_per_second(timer, communicator.device());
  reference();
  const at::ScalarType step_type = options.precision == Precision::mixed ? at::kBFloat16 : at::kFloat;
  m.fabric = measure_fabric(communicator, timer, step_type, options.max_collective_bytes);
  m.contention = measured_compute_contention(communicator, timer, step_type);
  m.issue_s = communication_issue_s(communicator, timer, step_type);
  m.synchronization_s = measured_synchronization_s(communicator, timer, step_type);
  reference();
  return m;
}

// Why the forward's curves cannot stand beside the pair's: the first length where the forward, as
// timed, leaves the backward no time or more than the peak; nothing where they can.
std::optional<std::string> forward_beyond_pair(const Measurements& m, double peak_flops) {
  const auto fraction = [&](double flops_per_second) {
    return std::clamp(flops_per_second / peak_flops, kLowestEfficiency, 1.0);
  };
  for (const auto& [pair, forward, what] : {std::tuple{&m.attention, &m.attention_forward, "attention"},
                                            std::tuple{&m.causal, &m.causal_forward, "causal attention"}}) {
    for (std::size_t i = 0; i < std::min(pair->size(), forward->size()); ++i) {
      const double pair_fraction = fraction((*pair)[i].second),
                   forward_fraction = fraction((*forward)[i].second);
      const double backward = attention_backward_efficiency(pair_fraction, forward_fraction);
      if (backward > 0 && backward <= 1) continue;
      char text[200];
      std::snprintf(text, sizeof text,
                    "%s of %.0f tokens: the forward timed at %.4f of the peak against the pair's %.4f leaves "
                    "the backward %s",
                    what, (*pair)[i].first, forward_fraction, pair_fraction,
                    backward > 0 ? "more than the peak" : "no time");
      return std::string(text);
    }
  }
  return std::nullopt;
}

}  // namespace

double own_speed_s(const std::vector<std::vector<double>>& reference_s, double spread) {
  std::vector<double> all_s;
  for (const std::vector<double>& pass : reference_s) all_s.insert(all_s.end(), pass.begin(), pass.end());
  PARADYSE_CHECK(!all_s.empty(), "references to take the speed of");
  // The timings within `spread` of each; the largest such set (the faster on a tie) is the speed the
  // machine ran at most.
  const auto near = [&](double centre_s) {
    std::vector<double> near_s;
    for (double t : all_s)
      if (std::abs(t / centre_s - 1) <= spread) near_s.push_back(t);
    return near_s;
  };
  std::sort(all_s.begin(), all_s.end());
  std::vector<double> most_s;
  for (double t : all_s)
    if (std::vector<double> near_s = near(t); near_s.size() > most_s.size()) most_s = std::move(near_s);
  return median(std::move(most_s));
}

std::vector<std::vector<int>> passes_at_speed(const std::vector<std::vector<double>>& reference_s,
                                              double spread) {
  PARADYSE_CHECK(!reference_s.empty() && reference_s.front().size() >= 2,
                 "passes with references around a group");
  for (const std::vector<double>& pass : reference_s)
    PARADYSE_CHECK(pass.size() == reference_s.front().size(), "every pass has the same groups");
  const double speed_s = own_speed_s(reference_s, spread);
  std::vector<std::vector<int>> kept(reference_s.front().size() - 1);
  for (std::size_t pass = 0; pass < reference_s.size(); ++pass)
    for (std::size_t g = 0; g < kept.size(); ++g)
      if (std::abs(reference_s[pass][g] / speed_s - 1) <= spread &&
          std::abs(reference_s[pass][g + 1] / speed_s - 1) <= spread)
        kept[g].push_back(static_cast<int>(pass));
  return kept;
}

MeasuredCurve efficiency_of_peak(const MeasuredCurve& flops_per_second, double peak_flops,
                                 const std::string& what, std::vector<std::string>& raised) {
  MeasuredCurve fractions;
  for (const auto& [x, y] : flops_per_second) {
    const double fraction = y / peak_flops;
    if (fraction < kLowestEfficiency) {
      char text[128];
      std::snprintf(text, sizeof text, "%s %.0f at %.3f %%", what.c_str(), x, 100 * fraction);
      raised.emplace_back(text);
    }
    fractions.emplace_back(x, std::clamp(fraction, kLowestEfficiency, 1.0));
  }
  return fractions;
}

std::string calibrate_local(Communicator& communicator, const ModelSpec& model,
                            const CalibrationOptions& options) {
  const RankTimer timer(communicator, std::max(1, options.repeats));
  const int ranks = communicator.size();
  const at::Device device = communicator.device();
  const bool on_gpu = device.is_cuda();
  TorchBackendOptions backend_options;
  backend_options.device = device;
  backend_options.precision = options.precision;
  TorchBackend backend(communicator, model, backend_options);
  // Every figure is the median of its samples at the machine's own speed, which lie a pass or more
  // apart: on a shared machine a slow spell puts a whole curve at half speed (seen: causal attention
  // at 1.3–1.6 GFLOP/s in one pass, 2.5–2.8 in the next).
  reference_seconds(communicator, backend, model);  // unkept: the process's first passes run slow
  const int wanted = std::max(1, options.passes);
  const double steady = options.any_speed ? std::numeric_limits<double>::infinity() : options.steady_spread;
  std::vector<Measurements> passes;
  std::vector<std::vector<double>> reference_s;
  std::vector<std::vector<int>> kept;
  const auto enough = [&] {
    return std::all_of(kept.begin(), kept.end(), [&](const std::vector<int>& group) {
      return static_cast<int>(group.size()) >= wanted;
    });
  };
  // Every rank has the same references (the slowest rank's), so all decide alike.
  while (passes.size() < static_cast<std::size_t>(3 * wanted) && (passes.empty() || !enough())) {
    passes.push_back(measure_once(communicator, timer, backend, model, options));
    reference_s.push_back(passes.back().reference_s);
    kept = passes_at_speed(reference_s, steady);
  }
  std::string samples;  // "GEMM and attention 3, kernels and copy 3, collectives 0"
  std::vector<std::string> short_groups;
  for (std::size_t g = 0; g < kept.size(); ++g) {
    samples += std::string(g ? ", " : " ") + kGroupNames[g] + " " + std::to_string(kept[g].size());
    if (kept[g].empty()) {  // never at speed: every pass, and say so
      for (int pass = 0; pass < static_cast<int>(passes.size()); ++pass) kept[g].push_back(pass);
      short_groups.push_back(kGroupNames[g]);
    }
  }
  Measurements m = median_of(passes, kept);
  m.reference_s = {own_speed_s(reference_s, steady)};
  std::vector<double> all_references_s;
  for (const std::vector<double>& pass : reference_s)
    all_references_s.insert(all_references_s.end(), pass.begin(), pass.end());
  if (options.note && communicator.rank() == 0 && !options.any_speed &&
      (spread(all_references_s) > options.steady_spread || !short_groups.empty())) {
    char speed[32];
    std::snprintf(speed, sizeof speed, "%.3f s", m.reference_s.front());
    std::string text = unsteady_text(all_references_s, options.steady_spread) +
                       "; each figure is the median of its samples at the machine's own speed (reference " +
                       speed + ", within " + std::to_string(std::lround(100 * options.steady_spread)) +
                       " %) over " + std::to_string(passes.size()) + " passes:" + samples;
    for (std::size_t i = 0; i < short_groups.size(); ++i)
      text += (i ? ", " : "; never at that speed, so from every pass: ") + short_groups[i];
    options.note(text);
  }
  const AttentionShape shape = local_attention_shape(model, ranks);
  communicator.barrier();
  if (communicator.rank() != 0) return "";

  const std::string host = host_name();
  const std::string type = options.precision == Precision::mixed ? "bf16" : "fp32";
  const std::string where = ", the median of its passes" +
                            std::string(options.any_speed ? " at any speed" : " at the machine's own speed") +
                            " (of " + std::to_string(passes.size()) + ") of a median of " +
                            std::to_string(std::max(1, options.repeats)) + " (the slowest rank's), on " +
                            host + ", " + std::to_string(ranks) + " ranks, " + type;
  auto measured = [&](const std::string& what) { return "measured by paradyse calibrate: " + what + where; };
  const double gemm_peak = peak(m.gemm);
  const int64_t largest_n = std::llround(std::cbrt(m.gemm.back().first / 2));
  const std::string attention_what =
      "TorchBackend attention forward + backward (scores in float32), q [1, s, " +
      std::to_string(shape.heads) + ", " + std::to_string(shape.head_dim) + "], " +
      std::to_string(shape.kv_heads) + " kv heads, FLOPs 3.5 x 4 heads d pairs, divided by the GEMM peak";

  OrderedJson gpu;
  const std::string device_model = device_name(device);
  gpu["name"] = on_gpu ? device_model : device_model + " (" + std::to_string(ranks) + " ranks sharing it)";
  gpu["bf16_flops_per_second"] = rounded(gemm_peak);
  gpu["hbm_bytes"] = device_memory_bytes(device) / (on_gpu ? 1 : ranks);
  gpu["hbm_bytes_per_second"] = rounded(m.copy);
  std::vector<std::string> raised;
  std::map<std::string, std::string> stalled;  // by curve: what its source adds when it has raised points
  const auto efficiency = [&](const Points& flops_per_second, const std::string& key,
                              const std::string& what) {
    const std::size_t before = raised.size();
    OrderedJson json = curve(efficiency_of_peak(flops_per_second, gemm_peak, what, raised), rounded);
    if (raised.size() > before)
      stalled[key] = "; points timed below a thousandth of the peak written as a thousandth";
    return json;
  };
  gpu["gemm_efficiency_by_flops"] = efficiency(m.gemm, "gemm_efficiency_by_flops", "GEMM of FLOPs");
  gpu["attention_efficiency_by_seq"] =
      efficiency(m.attention, "attention_efficiency_by_seq", "attention of tokens");
  gpu["causal_attention_efficiency_by_seq"] =
      efficiency(m.causal, "causal_attention_efficiency_by_seq", "causal attention of tokens");
  // The forward alone, so that a recomputed forward costs its own time; left out where a timing leaves
  // the backward no time or more than the peak (the machine moved between the two), as the loader
  // would refuse it.
  const std::optional<std::string> forward_refused = forward_beyond_pair(m, gemm_peak);
  if (!forward_refused) {
    gpu["attention_forward_efficiency_by_seq"] =
        efficiency(m.attention_forward, "attention_forward_efficiency_by_seq", "attention forward of tokens");
    gpu["causal_attention_forward_efficiency_by_seq"] = efficiency(
        m.causal_forward, "causal_attention_forward_efficiency_by_seq", "causal attention forward of tokens");
  } else if (options.note) {
    options.note(
        "the attention forward's curves are left out, the forward then priced at the pair's "
        "rate: " +
        *forward_refused);
  }
  if (!raised.empty() && options.note) {
    std::string text;
    for (const std::string& point : raised) text += (text.empty() ? "" : "; ") + point;
    options.note(
        "timed below a thousandth of the GEMM peak, so written as a thousandth (the machine "
        "stalled while they ran; calibrate again on a quiet machine for their own figures): " +
        text);
  }
  gpu["kernel_launch_seconds"] = rounded(m.launch_s);
  gpu["reserved_bytes"] = 0;
  gpu["allocator_fragmentation"] = 0;
  OrderedJson& measured_kernels = gpu["kernels"] = OrderedJson::object();
  for (const KernelPoints& kernel : m.kernels) {
    const std::string key = kernel.by_flops ? "flops_per_second_by_flops" : "bytes_per_second_by_bytes";
    const std::string name(to_string(kernel.kernel));
    OrderedJson& entry = measured_kernels[name];
    entry[key] = curve(kernel.rate_by_size, rounded);
    entry["source"] = {
        {key, measured("TorchBackend::" + name + " on inputs shaped as a step of " + model.name + " on " +
                       std::to_string(ranks) + " ranks shapes them (real_backend/kernel_probes.cpp), " +
                       (kernel.by_flops ? "FLOPs" : "bytes") +
                       " as the tracer counts them over the call's time, by that size")}};
  }
  gpu["source"] = {
      {"bf16_flops_per_second", measured("the highest FLOP/s of at::mm on square n x n matrices, n = 64 to " +
                                         std::to_string(largest_n) + " doubling")},
      {"hbm_bytes", on_gpu ? "CUDA's device properties: the GPU's total memory"
                           : "sysconf: the machine's physical memory (" + host + ") divided by its " +
                                 std::to_string(ranks) + " ranks"},
      {"hbm_bytes_per_second", measured("copy_ of a 64 MiB tensor, bytes read + written per second")},
      {"gemm_efficiency_by_flops", measured("at::mm of n x n matrices (2 n^3 FLOPs), FLOP/s over the peak") +
                                       stalled["gemm_efficiency_by_flops"]},
      {"attention_efficiency_by_seq",
       measured(attention_what + ", non-causal, by s") + stalled["attention_efficiency_by_seq"]},
      {"causal_attention_efficiency_by_seq", measured(attention_what + ", causal (s(s+1)/2 pairs), by s") +
                                                 stalled["causal_attention_efficiency_by_seq"]},
      {"kernel_launch_seconds",
       on_gpu ? measured("CUDA events around 100 at::add of two 1-element tensors queued behind 8192 x 8192 "
                         "bf16 GEMMs, so that the device runs them back to back, per add")
              : "none: on a CPU the host's dispatch (the host block) is an op's fixed cost"},
      {"reserved_bytes", on_gpu ? "none: validate compares the bytes the backend's tensors hold; the CUDA "
                                  "context and the allocator's cache are not counted"
                                : "none: CPU tensors have no device context"},
      {"allocator_fragmentation",
       "none: validate compares the bytes the backend's tensors hold, not what the process's allocator "
       "keeps"}};
  if (!forward_refused) {
    const std::string forward_what = "TorchBackend attention forward alone (scores in float32), q [1, s, " +
                                     std::to_string(shape.heads) + ", " + std::to_string(shape.head_dim) +
                                     "], " + std::to_string(shape.kv_heads) +
                                     " kv heads, FLOPs 4 heads d pairs, divided by the GEMM peak";
    gpu["source"]["attention_forward_efficiency_by_seq"] =
        measured(forward_what + ", non-causal, by s") + stalled["attention_forward_efficiency_by_seq"];
    gpu["source"]["causal_attention_forward_efficiency_by_seq"] =
        measured(forward_what + ", causal (s(s+1)/2 pairs), by s") +
        stalled["causal_attention_forward_efficiency_by_seq"];
  }
  if (m.host_link > 0) {  // activation offload's copies, and the host memory the machine's GPUs share
    const int gpus = std::max(1, visible_gpus());
    gpu["host_link_bytes_per_second"] = rounded(m.host_link);
    gpu["host_memory_bytes"] = host_memory_bytes() / gpus;
    gpu["source"]["host_link_bytes_per_second"] = measured(
        "CopyStream copies of 256 MiB between pinned host memory and the GPU on a stream of their "
        "own, the slower direction, every rank copying at once");
    gpu["source"]["host_memory_bytes"] = "sysconf: the machine's physical memory (" + host +
                                         ") divided by its " + std::to_string(gpus) + " GPUs";
  }

  OrderedJson intra;
  intra["bytes_per_second"] = rounded(peak(m.fabric.bus_bandwidth));
  intra["bus_bandwidth_by_bytes"] = curve(m.fabric.bus_bandwidth, rounded);
  intra["all_to_all_efficiency"] =
      fraction(m.fabric.all_to_all_bus_bandwidth / m.fabric.bus_bandwidth.back().second);
  intra["latency_seconds"] = rounded(m.fabric.latency_s);
  intra["all_gather_bus_bandwidth_by_bytes"] = curve(m.fabric.all_gather_bus_bandwidth, rounded);
  intra["reduce_scatter_bus_bandwidth_by_bytes"] = curve(m.fabric.reduce_scatter_bus_bandwidth, rounded);
  if (!m.fabric.send_recv_bandwidth.empty())
    intra["send_recv_bandwidth_by_bytes"] = curve(m.fabric.send_recv_bandwidth, rounded);
  // At most 0.99: the schema wants a share below 1.
  intra["compute_contention"] = std::min(0.99, rounded(m.contention.value));
  intra["synchronization_seconds"] = rounded(m.synchronization_s.value);
  const auto busy_gemms = [&type](const BesideGemms& figure) {
    return std::to_string(figure.gemm_size) + " x " + std::to_string(figure.gemm_size) + " " + type;
  };
  std::string compute_between;  // "1, 4, 16 and 64"
  for (std::size_t i = 0; i < kComputeBetweenSeconds.size(); ++i)
    compute_between += (i == 0                                   ? ""
                        : i + 1 == kComputeBetweenSeconds.size() ? " and "
                                                                 : ", ") +
                       std::to_string(std::lround(1e3 * kComputeBetweenSeconds[i]));
  const std::string largest = bytes_text(collective_sizes(options.max_collective_bytes).back());
  const std::string sizes = ", 1 KiB to " + largest + " by 4x";
  const std::string gloo =
      communicator.name() + " all-reduce of float32 over the " + std::to_string(ranks) +
      " ranks, a barrier before each repetition, below 4 MiB the mean of 10 back to back";
  intra["source"] = {
      {"bytes_per_second", measured("the highest all-reduce bus bandwidth below")},
      {"bus_bandwidth_by_bytes", measured(gloo + sizes + ", bus bandwidth 2(p-1)/p size / time")},
      {"all_to_all_efficiency",
       measured(communicator.name() + " all-to-all of " + largest +
                ", bus bandwidth (p-1)/p size / time, over the all-reduce's at " + largest)},
      {"latency_seconds", measured(gloo + ", 1 element")},
      {"all_gather_bus_bandwidth_by_bytes", measured(communicator.name() + " all-gather of " + type + sizes +
                                                     " gathered, bus bandwidth (p-1)/p size / time")},
      {"reduce_scatter_bus_bandwidth_by_bytes",
       measured("the backend's reduce-scatter of " + type + " (" + communicator.name() +
                ": an all-to-all, then the float32 sum of the chunks)" + sizes +
                " reduced, bus bandwidth (p-1)/p size / time")},
      {"send_recv_bandwidth_by_bytes",
       measured(communicator.name() + " send_recv of " + type +
                ", every rank sending to the next and receiving from the one before" + sizes +
                " sent, size / time")},
      {"compute_contention",
       measured("at::mm of " + busy_gemms(m.contention) + " matrices (the largest up to " +
                std::to_string(kBusyGemmSize) +
                " of at most a tenth of the all-gather), run back to back for about twice a " +
                communicator.name() + " all-gather of 16 MiB, timed alone and while the all-gather is in " +
                "flight; (together - GEMMs alone) / all-gather alone")},
      {"synchronization_seconds",
       on_gpu
           ? std::string("none: on a GPU the host does not wait for collectives; not measured")
           : measured(
                 "a chain on every rank of at::mm of " + busy_gemms(m.synchronization_s) +
                 " matrices (the largest up to " + std::to_string(kBusyGemmSize) +
                 " of at most a quarter of the shortest length) for " + compute_between +
                 " ms in turn, each followed by a " + communicator.name() + " collective of " +
                 std::to_string(kIssueBytes / 1024) +
                 " KiB a rank (all-gather, reduce-scatter, all-reduce, " +
                 "all-to-all and send_recv in turn), no barrier between: the chain's time less its GEMMs', " +
                 "a collective, less a collective's back to back, the mean over the lengths")}};
  OrderedJson inter = intra;
  for (OrderedJson& text : inter["source"]) text = "single machine: the intra-node figures";

  OrderedJson cluster;
  cluster["name"] = on_gpu ? "local-cuda" : "local-cpu";
  cluster["description"] = !options.description.empty()
                               ? options.description
                               : "this machine (" + host + "): " + device_model + ", " +
                                     std::to_string(ranks) + (on_gpu ? " GPU" : " CPU") +
                                     " ranks of paradyse's real backend over " + communicator.name() + ", " +
                                     type;
  cluster["gpus_per_node"] = ranks;
  cluster["nics_per_node"] = 1;
  cluster["source"] = {{"gpus_per_node", "the " + std::to_string(ranks) + " ranks of the calibration" +
                                             (on_gpu ? ", one a GPU" : ", each standing for a GPU")},
                       {"nics_per_node", "assumed: one machine, no NIC between its ranks; 1 for the schema"}};
  cluster["gpu"] = std::move(gpu);
  const std::string dispatch_what =
      "at::add of two 1-element tensors, the mean of 100 back to back" +
      std::string(on_gpu ? ", until the calls return (the kernels run later)" : "");
  OrderedJson issue_s = OrderedJson::object();
  for (const auto& [kind, seconds] : m.issue_s) issue_s[kind] = rounded(seconds);
  cluster["host"] = {
      {"kernel_dispatch_seconds", rounded(m.dispatch_s)},
      {"communication_dispatch_seconds", rounded(m.dispatch_s)},
      {"synchronous", !on_gpu},
      {"communication_dispatch_seconds_by_kind", issue_s},
      {"source",
       {{"kernel_dispatch_seconds", measured(dispatch_what)},
        {"communication_dispatch_seconds_by_kind",
         measured(communicator.name() + " collectives and send_recv of " +
                  std::to_string(kIssueBytes / 1024) + " KiB of " + type +
                  " a rank, the time until the call returns (its wait untimed)")},
        {"communication_dispatch_seconds",
         "assumed: an op's dispatch, " + measured(dispatch_what) +
             ", for the kinds not measured by kind; the collective's own cost is its fabric's"},
        {"synchronous", on_gpu
                            ? "the GPU backend queues kernels on a stream and returns; the host waits only "
                              "where a step reads a value"
                            : "the CPU backend runs each op on the calling thread, and waits on a "
                              "collective's work (Gloo) when the program waits for it"}}}};
  cluster["intra_node"] = std::move(intra);
  cluster["inter_node"] = std::move(inter);
  const std::string reference = "measured by paradyse calibrate: " + reference_description(model, ranks);
  const std::string at_speed =
      options.any_speed
          ? reference + ": the median of its timings during the calibration, whose every pass counts"
          : reference +
                ": the speed the machine ran at most during the calibration, the median of the "
                "largest set of its timings within " +
                std::to_string(std::lround(100 * options.steady_spread)) +
                " % of one of them; each figure is from the passes run within that of it";
  cluster["calibration"] = {
      {"reference_start_seconds", rounded(m.reference_s.front())},
      {"reference_end_seconds", rounded(m.reference_s.front())},
      {"source", {{"reference_start_seconds", at_speed}, {"reference_end_seconds", at_speed}}}};
  return cluster.dump(2);
}

}  // namespace paradyse::real
