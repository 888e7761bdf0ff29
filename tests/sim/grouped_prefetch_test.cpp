// The grouped step's prefetch (grouped_step.hpp): each layer's gather issued while the layer before it
// computes, waited for by its own layer, and one more layer's whole weights held at a time.
#include <catch2/catch.hpp>

#include <map>

#include "costmodel/program_cost.hpp"
#include "hw_models/cluster.hpp"
#include "steps/estimate.hpp"
#include "steps/step_simulator.hpp"
#include "strategies/grouped_step.hpp"
#include "strategies/layer_flat_layout.hpp"
#include "strategies/library.hpp"

using namespace paradyse;

namespace {

// One round: ranks [0, degree) train `tokens` by `strategy`, the job's other ranks are idle.
GroupedStepSpec one_group(const ModelSpec& model, const Strategy& strategy, int degree, int64_t tokens,
                          int job, bool prefetch) {
  StepSpec micro;
  micro.model = &model;
  micro.tokens = tokens;
  micro.plan = uniform_plan(strategy, model.num_layers);
  StepSpec idle;
  idle.model = &model;
  GroupedStepSpec spec;
  spec.model = &model;
  spec.num_layers = static_cast<int>(model.num_layers);
  spec.rounds = {{{0, degree, micro}, {degree, job - degree, idle}}};
  spec.prefetch_gathers = prefetch;
  return spec;
}

// Where a layer's gather is issued and where the compute stream waits for it, by phase index.
struct GatherUse {
  std::size_t issued_in = 0, waited_in = 0;
  bool before_compute = false;  // issued before the phase's first op with work
};

std::vector<GatherUse> layer_gathers(const Program& program, double flat_bytes) {
  std::vector<std::size_t> phase_of(program.ops.size());
  for (std::size_t p = 0; p < program.phases.size(); ++p) {
    const std::size_t end =
        p + 1 < program.phases.size() ? program.phases[p + 1].first_op : program.ops.size();
    for (std::size_t op = program.phases[p].first_op; op < end; ++op) phase_of[op] = p;
  }
  std::map<OpId, GatherUse> uses;
  for (OpId id = 0; id < program.ops.size(); ++id) {
    const Op& op = program.ops[id];
    if (op.kind == OpKind::all_gather && op.group == CommGroup::shard && op.size_bytes == flat_bytes) {
      GatherUse& use = uses[id];
      use.issued_in = phase_of[id];
      use.before_compute = true;
      for (OpId k = program.phases[phase_of[id]].first_op; k < id; ++k)
        if (program.ops[k].stream == Stream::compute && program.ops[k].flops > 0) use.before_compute = false;
    }
    if (op.kind == OpKind::wait)
      for (const OpId dep : op.deps)
        if (const auto it = uses.find(dep); it != uses.end()) it->second.waited_in = phase_of[id];
  }
  std::vector<GatherUse> out;
  for (const auto& [id, use] : uses) out.push_back(use);
  return out;
}

}  // namespace

TEST_CASE(
    "grouped step prefetch: each layer's gather starts under the layer before it, and is waited for by its "
    "own",
    "[sim]") {
  const ModelSpec model = load_model("llama-8l");
  const int job = 8;
  const double flat_bytes = static_cast<double>(layer_flat_layout(model).padded(job)) * 2;  // bf16
  const auto layers = static_cast<std::size_t>(model.num_layers);
  for (const int rank : {0, 5}) {  // a rank that trains, and an idle one
    INFO("rank " << rank);
    const std::vector<GatherUse> on = layer_gathers(
        trace_grouped_step(one_group(model, ulysses_z(), 4, 16384, job, true), rank, job), flat_bytes);
    const std::vector<GatherUse> off = layer_gathers(
        trace_grouped_step(one_group(model, ulysses_z(), 4, 16384, job, false), rank, job), flat_bytes);
    // Forward 0 … L−1, backward L−1 … 0: 2L gathers either way.
    REQUIRE(on.size() == 2 * layers);
    REQUIRE(off.size() == 2 * layers);
    for (std::size_t k = 0; k < off.size(); ++k) CHECK(off[k].issued_in == off[k].waited_in);
    // The first is the micro-batch's one exposed gather; every later one is issued in the phase of the
    // use before it, before that phase computes, and waited for in the next phase that uses weights.
    CHECK(on[0].issued_in == on[0].waited_in);
    for (std::size_t k = 1; k < on.size(); ++k) {
      INFO("gather " << k);
      CHECK(on[k].issued_in == on[k - 1].waited_in);
      CHECK(on[k].waited_in > on[k].issued_in);
      if (rank == 0) CHECK(on[k].before_compute);
    }
  }
}

TEST_CASE("grouped step prefetch: one more layer's whole weights held, and gathers hidden under compute",
          "[sim]") {
  const ModelSpec model = load_model("llama-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 1);
  const int job = 8;
  const double flat_bytes = static_cast<double>(layer_flat_layout(model).padded(job)) * 2;
  const double static_bytes = steps::static_memory_bytes(model, job, WeightLayout::job);
  const costmodel::OpTimer timer(cluster, job);
  // One GPU trains, so that no collective of its own queues behind a prefetched gather.
  const GroupedStepSpec on = one_group(model, ulysses_z(), 1, 16384, job, true);
  const GroupedStepSpec off = one_group(model, ulysses_z(), 1, 16384, job, false);
  const costmodel::ProgramPrice priced_on =
      costmodel::price_program(trace_grouped_step(on, 0, job), timer, static_bytes, 0);
  const costmodel::ProgramPrice priced_off =
      costmodel::price_program(trace_grouped_step(off, 0, job), timer, static_bytes, 0);
  CHECK(priced_on.peak_bytes - priced_off.peak_bytes == Approx(flat_bytes).epsilon(1e-9));
  steps::StepSimulator simulator(model, cluster);
  const sim::SimulationResult simulated_on = simulator.simulate_grouped(on);
  const sim::SimulationResult simulated_off = simulator.simulate_grouped(off);
  // The simulator's fold counts the allocator's fragmentation on top.
  CHECK(simulated_on.per_rank[0].peak_memory_bytes - simulated_off.per_rank[0].peak_memory_bytes ==
        Approx(flat_bytes * (1 + cluster.gpu.allocator_fragmentation)).epsilon(1e-9));

  // An idle rank's round is its gathers back to back; each of the 2L − 1 gathers after the first
  // hides under a layer that computes longer than it gathers.
  Program idle = trace_grouped_step(off, 5, job);
  double gather_s = 0;
  for (const Op& op : idle.ops)
    if (op.kind == OpKind::all_gather && op.group == CommGroup::shard && op.size_bytes == flat_bytes) {
      gather_s = timer.communication_s(op);
      break;
    }
  REQUIRE(gather_s > 0);

  const double hidden_s = static_cast<double>(2 * model.num_layers - 1) * gather_s;
  CAPTURE(priced_off.seconds, priced_on.seconds, hidden_s);
  CAPTURE(simulated_off.iteration_time_s, simulated_on.iteration_time_s);
  CHECK(priced_off.seconds - priced_on.seconds == Approx(hidden_s).epsilon(0.1));
  // The simulator's host runs ahead, so without the prefetch a forward gather, which waits for no
  // compute, starts early anyway; a backward one waits behind the reduce-scatter before it, which
  // waits for the layer's backward. With the prefetch both engines hide every gather but the first.
  CHECK(simulated_on.iteration_time_s <
        simulated_off.iteration_time_s - static_cast<double>(model.num_layers - 1) * gather_s);
  CHECK(simulated_on.iteration_time_s == Approx(priced_on.seconds).epsilon(0.01));
}

TEST_CASE("grouped step prefetch: a round without it gathers each layer as it uses it, the others prefetch",
          "[sim]") {
  const ModelSpec model = load_model("llama-8l");
  const int job = 8;
  const double flat_bytes = static_cast<double>(layer_flat_layout(model).padded(job)) * 2;
  const auto layers = static_cast<std::size_t>(model.num_layers);
  GroupedStepSpec spec = one_group(model, ulysses_z(), 4, 16384, job, true);
  spec.rounds.push_back(spec.rounds.front());
  spec.rounds_without_prefetch = {0};
  CHECK_NOTHROW(check_grouped_step(spec, job));
  for (const int rank : {0, 5}) {
    INFO("rank " << rank);
    const std::vector<GatherUse> gathers = layer_gathers(trace_grouped_step(spec, rank, job), flat_bytes);
    REQUIRE(gathers.size() == 4 * layers);
    for (std::size_t k = 0; k < 2 * layers; ++k) CHECK(gathers[k].issued_in == gathers[k].waited_in);
    CHECK(gathers[2 * layers].issued_in == gathers[2 * layers].waited_in);
    for (std::size_t k = 2 * layers + 1; k < gathers.size(); ++k) {
      INFO("gather " << k);
      CHECK(gathers[k].issued_in == gathers[k - 1].waited_in);
      CHECK(gathers[k].waited_in > gathers[k].issued_in);
    }
  }
  spec.rounds_without_prefetch = {2};
  CHECK_THROWS_WITH(check_grouped_step(spec, job),
                    Catch::Contains("rounds without prefetch") && Catch::Contains("got round 2"));
}

TEST_CASE(
    "grouped step: gradients reduced in fp32 carry twice the bytes of bf16, in the buffer and on the wire",
    "[sim]") {
  const ModelSpec model = load_model("llama-8l");
  const int job = 8;
  const auto flat_elements = static_cast<double>(layer_flat_layout(model).padded(job));
  GroupedStepSpec bf16 = one_group(model, ulysses_z(), 4, 16384, job, true);
  GroupedStepSpec fp32 = bf16;
  fp32.gradient_reduce_dtype = DType::fp32;
  // Every layer's whole gradient is reduce-scattered over the shard group once, in the chosen type.
  const auto layer_reductions = [&](const Program& program, double bytes) {
    int count = 0;
    for (const Op& op : program.ops)
      if (op.kind == OpKind::reduce_scatter && op.group == CommGroup::shard && op.size_bytes == bytes)
        ++count;
    return count;
  };
  for (const int rank : {0, 5}) {  // a rank that trains, and an idle one
    INFO("rank " << rank);
    const Program in_bf16 = trace_grouped_step(bf16, rank, job);
    const Program in_fp32 = trace_grouped_step(fp32, rank, job);
    CHECK(layer_reductions(in_bf16, flat_elements * 2) == model.num_layers);
    CHECK(layer_reductions(in_fp32, flat_elements * 4) == model.num_layers);
    CHECK(layer_reductions(in_fp32, flat_elements * 2) == 0);
  }
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 1);
  const costmodel::OpTimer timer(cluster, job);
  const double static_bytes = steps::static_memory_bytes(model, job, WeightLayout::job);
  const costmodel::ProgramPrice priced_bf16 =
      costmodel::price_program(trace_grouped_step(bf16, 0, job), timer, static_bytes, 0);
  const costmodel::ProgramPrice priced_fp32 =
      costmodel::price_program(trace_grouped_step(fp32, 0, job), timer, static_bytes, 0);
  CAPTURE(priced_bf16.peak_bytes, priced_fp32.peak_bytes, flat_elements);
  CHECK(priced_fp32.peak_bytes - priced_bf16.peak_bytes == Approx(flat_elements * 2).epsilon(1e-9));
  CHECK(priced_fp32.seconds > priced_bf16.seconds);
}
