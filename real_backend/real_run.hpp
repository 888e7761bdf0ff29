// Training steps run for real on this process's rank: what `paradyse run` and `paradyse validate`
// measure. Every rank of the group calls run_training with the same request; rank 0 returns what
// was measured, gathered over the ranks. Project types only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "program/backend.hpp"
#include "real_backend/calibration_options.hpp"
#include "real_backend/launcher.hpp"
#include "strategies/strategy.hpp"

namespace paradyse::real {

class Communicator;  // real_backend/communicator.hpp (LibTorch types)

struct RunRequest {
  const ModelSpec* model = nullptr;
  Plan plan;                     // one entry per layer run
  std::vector<int64_t> lengths;  // tokens per sequence; each a multiple of the layout's (checked)
  // A packed micro-batch: its documents, each a multiple of the layout's, and `lengths` their sum alone.
  // Empty: one document per sequence.
  std::vector<int64_t> documents;
  int64_t batch = 1;
  int warmup_steps = 1;  // run, not measured: first-touch allocations and connection setup
  int steps = 3;         // measured, per length
  bool cuda = false;
  // With cuda: ranks talk through Gloo, staging their CUDA tensors through the host, so that several
  // may share one GPU (numerics on a one-GPU machine); else NCCL, one rank a GPU.
  bool gloo_on_device = false;
  bool mixed_precision = true;  // bf16 activations and weights as the tracer counts them; else float32
  std::chrono::seconds timeout{120};
  bool profile_ops = false;  // time every op of the last measured step of each length (rank 0)
  // Time the machine-speed reference (machine_speed.hpp) before and after each length's steps.
  bool time_reference = false;
  uint64_t seed = 1;
};

struct TimedOp {
  int64_t seq;
  Phase phase;
  int layer;
  std::string label;
  std::string op;
  double seconds;
};

struct LengthMeasurement {
  int64_t seq = 0;
  std::vector<double> step_s;  // each measured step, slowest rank (steps end at a barrier)
  // With time_reference: the reference's seconds before the length's first step and after its last.
  double reference_before_s = 0, reference_after_s = 0;
  // Merged over rounds (merge_rounds): the rounds run, and those whose steps were kept (at speed).
  int rounds_run = 1, rounds_kept = 1;
  double median_step_s = 0;
  double loss_per_token = 0;  // last step, over the ranks' tokens
  int64_t peak_bytes = 0;     // most any rank's backend held (HeldBytes) during the measured steps
  // Most any rank's allocator handed out, op temporaries too: the host allocator's on CPU, the CUDA
  // caching allocator's allocated bytes on a GPU.
  int64_t process_peak_bytes = 0;
  int64_t reserved_peak_bytes = 0;       // on a GPU: most any rank's caching allocator took from the driver
  int64_t saved_bytes_per_layer = 0;     // rank 0: live bytes each layer's forward left, mean
  std::vector<double> layer_forward_s;   // rank 0, last step, per layer
  std::vector<double> layer_backward_s;  // rank 0, last step, per layer
};

struct RunReport {
  std::string communicator;  // "gloo" or "nccl"
  int ranks = 0;
  std::vector<LengthMeasurement> lengths;
  std::vector<TimedOp> ops;  // with profile_ops
};

// Why this build cannot run `local_ranks` ranks on this machine's device, if it cannot (a CPU-only
// LibTorch asked for CUDA, no GPU visible, no NCCL, more ranks than GPUs without gloo_on_device); call
// it before starting ranks.
std::optional<std::string> device_unavailable(bool cuda, int local_ranks, bool gloo_on_device);

// Takes the communicator a run has connected and returns the one the run uses: a decorator that
// observes or alters its calls (the tests kill a rank at its N-th call with one).
using CommunicatorDecorator = std::function<std::unique_ptr<Communicator>(std::unique_ptr<Communicator>)>;

// Every request in turn on one communicator (all must agree on device and timeout), passed through
// `decorate` when one is given; rank 0 gets a report per request, the other ranks an empty vector.
std::vector<RunReport> run_training(const RankEnvironment& env, const std::vector<RunRequest>& requests,
                                    const CommunicatorDecorator& decorate = {});

// validate's match of the machine's speed: a round's steps of a length are kept when the speed
// reference before and after them is within `tolerance` of the calibration's (the speed its figures
// were measured at), so that a model is compared with the machine it describes and not with the
// machine in another tenant's slow spell. reference_s 0: every round is kept.
struct SpeedMatch {
  double reference_s = 0;
  double tolerance = 0.10;
  bool at_speed(const LengthMeasurement& m) const;
};

// validate's protocol on a shared machine: every request once per round, the same order each round,
// `rounds` rounds; rank 0 gets a report per request, merged over its rounds (merge_rounds). A row's
// steps are then one round apart, spread over the whole run, where `steps` in one round fall within
// seconds: on this project's development VM the machine's speed moves 0.55–1.1x from one minute to the
// next, and a row measured inside one spell was off by up to 58 % where its neighbours agreed within
// 27 %. With a speed to match, a request whose lengths have fewer than `rounds` rounds at speed runs
// again, up to 2 × rounds rounds in all. Op timings (profile_ops) come from round `rounds` only.
std::vector<RunReport> run_training_in_rounds(const RankEnvironment& env,
                                              const std::vector<RunRequest>& requests, int rounds,
                                              const SpeedMatch& match = {});

// One request's reports, one per round, as one: the steps of every round kept by `match` (every
// round when none is) and their median; the speed reference's median before and after over those
// rounds; the largest peaks; the loss, layer spans and ops of round `base` (the rounds run the same
// steps from the same seed; default the last).
RunReport merge_rounds(const std::vector<RunReport>& rounds, const SpeedMatch& match = {},
                       std::optional<std::size_t> base = std::nullopt);

// `paradyse calibrate` on this rank: measures this machine as `options` say (calibration.hpp), on its
// GPUs with `cuda` (one rank each, NCCL), every rank at once; rank 0 gets the cluster JSON text, the
// others nullopt.
std::optional<std::string> calibrate_on_rank(const RankEnvironment& env, const ModelSpec& model, bool cuda,
                                             const CalibrationOptions& options, std::chrono::seconds timeout);

}  // namespace paradyse::real
