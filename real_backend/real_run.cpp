#include "real_backend/real_run.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "common/errors.hpp"
#include "common/statistics.hpp"
#include "real_backend/calibration.hpp"
#include "real_backend/compute_threads.hpp"
#include "real_backend/connect.hpp"
#include "real_backend/device.hpp"
#include "real_backend/held_bytes.hpp"
#include "real_backend/host_allocator.hpp"
#include "real_backend/machine_speed.hpp"
#include "real_backend/rank_timer.hpp"
#include "real_backend/torch_backend.hpp"
#include "strategies/training_step.hpp"

namespace paradyse::real {
namespace {

struct PhaseSpans {
  std::vector<double> forward, backward;
  int64_t saved_bytes_per_layer = 0;
};

// Layer times and saved bytes from the phase marks of one step.
PhaseSpans phase_spans(const std::vector<PhaseTiming>& phases, std::size_t layers) {
  PhaseSpans spans{std::vector<double>(layers), std::vector<double>(layers), 0};
  std::vector<int64_t> forward_live;
  for (std::size_t i = 0; i + 1 < phases.size(); ++i) {
    const PhaseTiming& p = phases[i];
    const double seconds = phases[i + 1].start_s - p.start_s;
    if (p.layer < 0) continue;
    const auto layer = static_cast<std::size_t>(p.layer);
    if (p.phase == Phase::layer_forward) {
      spans.forward[layer] += seconds;
      forward_live.push_back(p.live_bytes);
      if (layer + 1 == layers) forward_live.push_back(phases[i + 1].live_bytes);  // the head begins
    }
    if (p.phase == Phase::layer_backward) spans.backward[layer] += seconds;
  }
  // What a layer's forward leaves alive is the next layer's starting point minus its own.
  if (forward_live.size() >= 2)
    spans.saved_bytes_per_layer =
        (forward_live.back() - forward_live.front()) / static_cast<int64_t>(forward_live.size() - 1);
  return spans;
}

}  // namespace

std::optional<std::string> device_unavailable(bool cuda, int local_ranks, bool gloo_on_device) {
  if (!cuda) return std::nullopt;
#ifndef PARADYSE_TORCH_CUDA
  (void)local_ranks;
  (void)gloo_on_device;
  return "this paradyse is built against a CPU-only LibTorch, which cannot run on GPUs: configure with "
         "-DCMAKE_PREFIX_PATH=<a CUDA LibTorch>/share/cmake to use --device cuda (docs/gpu.md)";
#else
  if (!at::hasCUDA()) return "LibTorch has CUDA but cannot use it here: no GPU or no NVIDIA driver";
  const int gpus = visible_gpus();
  if (gpus == 0) return "LibTorch has CUDA but no GPU is visible (CUDA_VISIBLE_DEVICES?)";
  if (gloo_on_device) return std::nullopt;
  if (local_ranks > gpus)
    return std::to_string(local_ranks) + " ranks on a machine with " + std::to_string(gpus) + " GPU" +
           (gpus == 1 ? "" : "s") + ": NCCL runs one rank per GPU (--gloo-on-device runs several on one, " +
           "for numerics)";
#ifndef PARADYSE_WITH_NCCL
  return "this paradyse was built without NCCL (not found at configure time), so GPUs cannot communicate "
         "through it; --gloo-on-device stages them through the host";
#else
  return std::nullopt;
#endif
#endif
}

namespace {

// One request's steps on an open communicator.
RunReport run_request(const RankEnvironment& env, Communicator* communicator, const RunRequest& request) {
  PARADYSE_CHECK(request.model != nullptr && !request.plan.empty(), "a run needs a model and a plan");
  TorchBackendOptions options;
  options.device = communicator->device();
  options.precision = request.mixed_precision ? Precision::mixed : Precision::fp32;
  options.weight_seed = request.seed;
  const ModelSpec& model = *request.model;
  TorchBackend be(*communicator, model, options);
  ModelShards shards(be, model, static_cast<int>(request.plan.size()));

  RunReport report;
  report.communicator = communicator->name();
  report.ranks = env.size;
  at::Generator tokens_generator =
      at::make_generator<at::CPUGeneratorImpl>(request.seed + 1000 * env.rank + 1);
  for (const int64_t seq : request.lengths) {
    StepSpec spec;
    spec.model = &model;
    spec.tokens = seq;
    spec.documents = request.documents;
    spec.batch = request.batch;
    spec.plan = request.plan;
    const int64_t local = seq / env.size;
    LengthMeasurement m;
    m.seq = seq;
    if (request.time_reference) m.reference_before_s = reference_seconds(*communicator, be, model);
    double loss = 0;
    for (int step = 0; step < request.warmup_steps + request.steps; ++step) {
      const bool measured = step >= request.warmup_steps;
      const bool last = step + 1 == request.warmup_steps + request.steps;
      const Tensor tokens =
          be.wrap(at::randint(model.vocab, {request.batch, local}, tokens_generator), DType::int64);
      const Tensor targets =
          be.wrap(at::randint(model.vocab, {request.batch, local}, tokens_generator), DType::int64);
      communicator->barrier();
      if (measured && step == request.warmup_steps) {
        HostAllocator::reset_peak();
        reset_device_memory_peaks(options.device);
        be.held_bytes().reset_peak();
      }
      be.clear_records();
      be.set_profile_ops(request.profile_ops && last);
      const double start = be.seconds_since_start();
      const Tensor step_loss = training_step(be, spec, shards, tokens, targets);
      be.synchronize();
      communicator->barrier();
      const double seconds = be.seconds_since_start() - start;
      // The next step accumulates from zero (Megatron's zero_grad_buffer; its memset is not timed).
      for (Tensor* gradient : shards.gradients())
        if (gradient->defined()) TorchBackend::unwrap(*gradient).zero_();
      if (!measured) continue;
      m.step_s.push_back(seconds);
      loss = TorchBackend::unwrap(step_loss).item<double>();
      if (last) {
        const PhaseSpans spans = phase_spans(be.phases_timed(), request.plan.size());
        m.layer_forward_s = spans.forward;
        m.layer_backward_s = spans.backward;
        m.saved_bytes_per_layer = spans.saved_bytes_per_layer;
        for (const OpTiming& op : be.ops_timed())
          report.ops.push_back({seq, op.phase, op.layer, op.label, std::string(op.op), op.seconds});
      }
    }
    // Step times are already the slowest rank's (each step ends at a barrier); peaks and loss are not.
    const DeviceMemory device = device_memory_peaks(options.device);
    const std::vector<double> peaks = max_over_ranks(
        *communicator, {static_cast<double>(be.held_bytes().peak()),
                        static_cast<double>(options.device.is_cuda() ? device.allocated_peak_bytes
                                                                     : HostAllocator::peak_bytes()),
                        static_cast<double>(device.reserved_peak_bytes)});
    m.peak_bytes = static_cast<int64_t>(peaks[0]);
    m.process_peak_bytes = static_cast<int64_t>(peaks[1]);
    m.reserved_peak_bytes = static_cast<int64_t>(peaks[2]);
    at::Tensor total_loss = at::tensor({loss}, at::kDouble).to(communicator->device());
    communicator->all_reduce(total_loss)->wait();
    m.loss_per_token = on_host(total_loss).item<double>() / static_cast<double>(seq * request.batch);
    m.median_step_s = median(m.step_s);
    if (request.time_reference) m.reference_after_s = reference_seconds(*communicator, be, model);
    report.lengths.push_back(std::move(m));
  }
  communicator->barrier();
  return report;
}

void prepare_process(const RankEnvironment& env) {
  HostAllocator::install();  // before any tensor, so that every byte is counted
  set_compute_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / env.size));
}

// This process prepared for a run and connected to its peers as the requests' first asks.
std::unique_ptr<Communicator> open_run(const RankEnvironment& env, const std::vector<RunRequest>& requests) {
  PARADYSE_CHECK(!requests.empty(), "a run needs a request");
  prepare_process(env);
  const RunRequest& first = requests[0];
  return connect(env, rank_device(env, first.cuda, first.gloo_on_device), first.gloo_on_device,
                 first.timeout);
}

}  // namespace

std::vector<RunReport> run_training(const RankEnvironment& env, const std::vector<RunRequest>& requests,
                                    const CommunicatorDecorator& decorate) {
  std::unique_ptr<Communicator> communicator = open_run(env, requests);
  if (decorate) communicator = decorate(std::move(communicator));
  PARADYSE_CHECK(communicator != nullptr, "the communicator decorator returned none");
  std::vector<RunReport> reports;
  for (const RunRequest& request : requests) reports.push_back(run_request(env, communicator.get(), request));
  if (env.rank != 0) reports.clear();
  return reports;
}

bool SpeedMatch::at_speed(const LengthMeasurement& m) const {
  if (reference_s <= 0) return true;
  const auto near = [&](double t) { return t > 0 && std::abs(t / reference_s - 1) <= tolerance; };
  return near(m.reference_before_s) && near(m.reference_after_s);
}

std::vector<RunReport> run_training_in_rounds(const RankEnvironment& env,
                                              const std::vector<RunRequest>& requests, int rounds,
                                              const SpeedMatch& match) {
  PARADYSE_CHECK(rounds >= 1, "at least one round");
  const std::unique_ptr<Communicator> communicator = open_run(env, requests);
  // Every rank sees the same references (the slowest rank's), so all choose the same requests.
  const auto short_of_speed = [&](const std::vector<RunReport>& done) {
    for (std::size_t j = 0; j < done.front().lengths.size(); ++j)
      if (std::count_if(done.begin(), done.end(),
                        [&](const RunReport& r) { return match.at_speed(r.lengths[j]); }) < rounds)
        return true;
    return false;
  };
  std::vector<std::vector<RunReport>> by_request(requests.size());
  const int most_rounds = match.reference_s > 0 ? 2 * rounds : rounds;
  for (int round = 1; round <= most_rounds; ++round)
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (round > rounds && !short_of_speed(by_request[i])) continue;
      RunRequest request = requests[i];
      request.profile_ops = request.profile_ops && round == rounds;
      by_request[i].push_back(run_request(env, communicator.get(), request));
    }
  if (env.rank != 0) return {};
  std::vector<RunReport> merged;
  for (const std::vector<RunReport>& of_request : by_request)
    merged.push_back(merge_rounds(of_request, match, static_cast<std::size_t>(rounds - 1)));
  return merged;
}

RunReport merge_rounds(const std::vector<RunReport>& rounds, const SpeedMatch& match,
                       std::optional<std::size_t> base) {
  PARADYSE_CHECK(!rounds.empty(), "merging no rounds");
  PARADYSE_CHECK(!base || *base < rounds.size(), "the base round is one of the rounds");
  RunReport merged = rounds[base.value_or(rounds.size() - 1)];
  for (std::size_t j = 0; j < merged.lengths.size(); ++j) {
    LengthMeasurement& m = merged.lengths[j];
    std::vector<const LengthMeasurement*> kept;
    for (const RunReport& round : rounds) {
      PARADYSE_CHECK(round.lengths.size() == merged.lengths.size() && round.lengths[j].seq == m.seq,
                     "rounds of one request measure the same lengths");
      if (match.at_speed(round.lengths[j])) kept.push_back(&round.lengths[j]);
    }
    m.rounds_run = static_cast<int>(rounds.size());
    m.rounds_kept = static_cast<int>(kept.size());
    if (kept.empty())  // never at speed: every round, and the row says so (rounds_kept 0)
      for (const RunReport& round : rounds) kept.push_back(&round.lengths[j]);
    std::vector<double> steps, before, after;
    for (const RunReport& round : rounds) {
      const LengthMeasurement& r = round.lengths[j];
      m.peak_bytes = std::max(m.peak_bytes, r.peak_bytes);
      m.process_peak_bytes = std::max(m.process_peak_bytes, r.process_peak_bytes);
      m.reserved_peak_bytes = std::max(m.reserved_peak_bytes, r.reserved_peak_bytes);
    }
    for (const LengthMeasurement* r : kept) {
      steps.insert(steps.end(), r->step_s.begin(), r->step_s.end());
      before.push_back(r->reference_before_s);
      after.push_back(r->reference_after_s);
    }
    m.step_s = steps;
    m.median_step_s = median(std::move(steps));
    m.reference_before_s = median(std::move(before));
    m.reference_after_s = median(std::move(after));
  }
  return merged;
}

std::optional<std::string> calibrate_on_rank(const RankEnvironment& env, const ModelSpec& model, bool cuda,
                                             const CalibrationOptions& options,
                                             std::chrono::seconds timeout) {
  prepare_process(env);
  auto communicator = connect(env, rank_device(env, cuda, false), /*gloo_on_device=*/false, timeout);
  std::string json = calibrate_local(*communicator, model, options);
  communicator->barrier();
  if (env.rank != 0) return std::nullopt;
  return json;
}

}  // namespace paradyse::real
