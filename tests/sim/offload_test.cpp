// Activation offload (Recompute::offload): what a traced step copies to host memory and back, when, and
// what it saves of device memory; priced by the host link, the same on the analytic model and the
// simulator.
#include <catch2/catch.hpp>

#include <map>

#include "common/errors.hpp"
#include "costmodel/program_cost.hpp"
#include "hw_models/cluster.hpp"
#include "sim/simulator.hpp"
#include "steps/estimate.hpp"
#include "steps/step_programs.hpp"
#include "steps/step_simulator.hpp"
#include "strategies/library.hpp"
#include "strategies/training_step.hpp"

using namespace paradyse;

namespace {

constexpr int kDegree = 8;
constexpr int64_t kTokens = 65536;

Program traced(const ModelSpec& model, Recompute recompute) {
  StepSpec spec;
  spec.model = &model;
  spec.tokens = kTokens;
  spec.plan = uniform_plan(ulysses_z(), model.num_layers, recompute);
  return trace_training_step(spec, 0, kDegree);
}

// The phase each op is in.
std::vector<std::size_t> phase_of_ops(const Program& program) {
  std::vector<std::size_t> phase_of(program.ops.size());
  for (std::size_t p = 0; p < program.phases.size(); ++p) {
    const std::size_t end =
        p + 1 < program.phases.size() ? program.phases[p + 1].first_op : program.ops.size();
    for (std::size_t op = program.phases[p].first_op; op < end; ++op) phase_of[op] = p;
  }
  return phase_of;
}

// The phase index of layer `layer`'s forward or backward.
std::size_t phase_index(const Program& program, Phase phase, int layer) {
  for (std::size_t p = 0; p < program.phases.size(); ++p)
    if (program.phases[p].phase == phase && program.phases[p].layer == layer) return p;
  FAIL("no phase " << to_string(phase) << " of layer " << layer);
  return 0;
}

// Live bytes a layer's forward leaves allocated, without offload: what it keeps for its backward.
double saved_bytes(const Program& program, int layer) {
  const std::size_t p = phase_index(program, Phase::layer_forward, layer);
  double bytes = 0;
  for (uint32_t e = program.phases[p].first_memory_event; e < program.phases[p + 1].first_memory_event; ++e)
    bytes += static_cast<double>(program.memory[e].bytes);
  return bytes;
}

}  // namespace

TEST_CASE(
    "offload: every layer but the last copies out what it keeps under the next layer's forward, and "
    "back under the next layer's backward",
    "[sim]") {
  const ModelSpec model = load_model("llama-8l");
  const int layers = static_cast<int>(model.num_layers);
  const Program kept = traced(model, Recompute::none);
  const Program offloaded = traced(model, Recompute::offload);
  const std::vector<std::size_t> phase_of = phase_of_ops(offloaded);
  std::map<int, OpId> out, back;  // by the layer whose activations move
  for (OpId id = 0; id < offloaded.ops.size(); ++id) {
    const Op& op = offloaded.ops[id];
    CHECK((op.kind == OpKind::host_copy) == (op.stream == Stream::copy));
    if (op.kind != OpKind::host_copy) continue;
    const PhaseMark& mark = offloaded.phases[phase_of[id]];
    if (op.kernel == Kernel::offload) {
      REQUIRE(mark.phase == Phase::layer_forward);
      out[mark.layer - 1] = id;
    } else {
      REQUIRE(op.kernel == Kernel::reload);
      REQUIRE(mark.phase == Phase::layer_backward);
      back[mark.layer - 1] = id;
    }
  }
  REQUIRE(static_cast<int>(out.size()) == layers - 1);
  REQUIRE(static_cast<int>(back.size()) == layers - 1);
  for (int layer = 0; layer + 1 < layers; ++layer) {
    INFO("layer " << layer);
    REQUIRE(out.count(layer) == 1);
    REQUIRE(back.count(layer) == 1);
    // What moves is exactly what the layer keeps without offload, out and back.
    CHECK(offloaded.ops[out[layer]].size_bytes == saved_bytes(kept, layer));
    CHECK(offloaded.ops[back[layer]].size_bytes == saved_bytes(kept, layer));
    // The copy out waits for the layer's forward and is issued before the next layer computes; the
    // compute stream waits for it before the next layer's forward ends, and for the copy back before
    // this layer's backward computes.
    const std::size_t next_forward = phase_index(offloaded, Phase::layer_forward, layer + 1);
    const std::size_t backward = phase_index(offloaded, Phase::layer_backward, layer);
    bool computed_before_out = false;
    for (OpId k = offloaded.phases[next_forward].first_op; k < out[layer]; ++k)
      computed_before_out = computed_before_out || offloaded.ops[k].flops > 0;
    CHECK_FALSE(computed_before_out);
    std::size_t out_waited = 0, back_waited = 0;
    for (OpId id = 0; id < offloaded.ops.size(); ++id) {
      const Op& op = offloaded.ops[id];
      if (op.kind != OpKind::wait) continue;
      for (const OpId dep : op.deps) {
        if (dep == out[layer]) out_waited = phase_of[id];
        if (dep == back[layer]) {
          back_waited = phase_of[id];
          for (OpId k = offloaded.phases[backward].first_op; k < id; ++k) CHECK(offloaded.ops[k].flops == 0);
        }
      }
    }
    CHECK(out_waited == next_forward);
    CHECK(back_waited == backward);
  }
  // Host memory holds every offloaded layer's activations at once, before the first comes back.
  double all_but_last = 0;
  for (int layer = 0; layer + 1 < layers; ++layer) all_but_last += saved_bytes(kept, layer);
  CHECK(static_cast<double>(host_memory_peak(offloaded).bytes) == all_but_last);
  CHECK(host_memory_peak(kept).bytes == 0);
}

TEST_CASE("offload: the device holds two layers' activations at most, and the host link prices the copies",
          "[sim]") {
  // 256K tokens on 8 GPUs: each layer computes longer than DGX A100's host link takes to copy what it
  // keeps (its attention grows with the square of the length, its activations with the length).
  const ModelSpec model = load_model("llama-8l");
  const auto layers = static_cast<double>(model.num_layers);
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const steps::EstimateRequest request{.tokens = 262144, .degree = kDegree};
  const auto step = [&](Recompute recompute) {
    return steps::trace_plan_step(model, cluster, uniform_plan(ulysses_z(), model.num_layers, recompute),
                                  request);
  };
  const steps::StepPrograms kept = step(Recompute::none), offloaded = step(Recompute::offload);
  const double saved = saved_bytes(kept.programs[0], 1);
  const auto price = [&](const steps::StepPrograms& programs) {
    return costmodel::price_program(programs.programs[0], costmodel::OpTimer(cluster, kDegree),
                                    programs.static_bytes, cluster.gpu.allocator_fragmentation);
  };
  const costmodel::ProgramPrice none = price(kept), off = price(offloaded);
  // Without offload every layer's activations are on the device at the end of the forward; with it, the
  // last layer's and at most one more, coming or going.
  const double fragmentation = 1 + cluster.gpu.allocator_fragmentation;
  CAPTURE(none.peak_bytes, off.peak_bytes, saved);
  CHECK(none.peak_bytes - off.peak_bytes >= (layers - 2) * saved * fragmentation * (1 - 1e-9));
  CHECK(none.peak_bytes - off.peak_bytes <= (layers - 1) * saved * fragmentation * (1 + 1e-9));
  CHECK(off.host_peak_bytes == Approx((layers - 1) * saved));
  // The copies run under the layers' compute.
  CHECK(off.seconds == Approx(none.seconds).epsilon(0.01));

  // On a host link a hundred times slower the copies bound the step: each offloaded layer's copies out
  // and back run on the one copy stream, so the step takes at least their time.
  cluster.gpu.host_link_bytes_per_second /= 100;
  const costmodel::ProgramPrice slow = price(offloaded);
  const double copy_s = saved / cluster.gpu.host_link_bytes_per_second;
  CAPTURE(slow.seconds, copy_s, none.seconds);
  CHECK(slow.seconds >= 2 * (layers - 1) * copy_s);

  // The simulator runs the same copies on the rank's copy stream.
  cluster.gpu.host_link_bytes_per_second *= 100;
  sim::Simulator simulator(cluster);
  const sim::SimulationResult simulated =
      simulator.run(step(Recompute::offload).programs, offloaded.static_bytes);
  // (The simulator's fold also holds the step's input tokens and targets, which price_program leaves to
  // its caller: half a megabyte here.)
  CHECK(simulated.per_rank[0].peak_memory_bytes == Approx(off.peak_bytes).epsilon(1e-4));
  CHECK(simulated.host_peak_bytes == Approx(off.host_peak_bytes));
  CHECK(simulated.iteration_time_s == Approx(off.seconds).epsilon(0.02));
}

TEST_CASE("offload: refused where it cannot be priced", "[sim]") {
  const ModelSpec model = load_model("llama-8l");
  // A cluster without a host link (a calibrated CPU's, or a file that leaves it out).
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  cluster.gpu.host_link_bytes_per_second = 0;
  const Program offloaded = traced(model, Recompute::offload);
  CHECK_THROWS_WITH(costmodel::price_program(offloaded, costmodel::OpTimer(cluster, kDegree), 0, 0),
                    Catch::Contains("host_link_bytes_per_second") && Catch::Contains("activation offload"));
  // A layer priced alone, as a cost table composes them.
  steps::Estimator estimator(model, hw::load_cluster("dgx-a100"));
  CHECK_THROWS_WITH(
      estimator.cost_table({{&ulysses_z(), Recompute::offload}}, {.tokens = kTokens, .degree = kDegree}),
      Catch::Contains("whole programs only"));
}

TEST_CASE("offload: an estimate prices the whole step as the simulator runs it, host memory included",
          "[sim]") {
  const ModelSpec model = load_model("llama-8l");
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const steps::EstimateRequest request{.tokens = 262144, .degree = kDegree};
  const Plan plan = uniform_plan(ulysses_z(), model.num_layers, Recompute::offload);
  steps::Estimator estimator(model, cluster);
  const steps::Estimate offloaded = estimator.estimate(plan, request);
  const steps::Estimate kept = estimator.estimate(ulysses_z(), request);

  const steps::StepPrograms programs = steps::trace_plan_step(model, cluster, plan, request);
  const sim::SimulationResult simulated =
      sim::Simulator(cluster).run(programs.programs, programs.static_bytes);
  CAPTURE(offloaded.time.total_s, simulated.iteration_time_s, offloaded.memory.peak_bytes);
  CHECK(offloaded.time.total_s == Approx(simulated.iteration_time_s).epsilon(0.02));
  CHECK(offloaded.memory.peak_bytes == Approx(simulated.per_rank[0].peak_memory_bytes).epsilon(1e-4));
  CHECK(offloaded.memory.offloaded_bytes == Approx(simulated.host_peak_bytes));
  CHECK(kept.memory.offloaded_bytes == 0);
  // At this length only the offloaded step fits on an 80 GB GPU.
  CHECK_FALSE(kept.fits);
  CHECK(offloaded.fits);
  CHECK(offloaded.memory.host_capacity_bytes == cluster.gpu.host_memory_bytes);

  // A host that cannot hold the offloaded activations: out of memory, however little the GPU holds.
  cluster.gpu.host_memory_bytes = offloaded.memory.offloaded_bytes / 2;
  steps::Estimator small_host(model, cluster);
  const steps::Estimate short_of_host = small_host.estimate(plan, request);
  CHECK(short_of_host.memory.peak_bytes == Approx(offloaded.memory.peak_bytes));
  CHECK_FALSE(short_of_host.fits);
}
