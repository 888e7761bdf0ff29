// A step exported as Chakra traces and run back on the simulator takes the time the simulator gives the
// same plan directly.
#include <catch2/catch.hpp>

#include "chakra/export.hpp"
#include "chakra/import.hpp"
#include "evaluation/grouped_step_option.hpp"
#include "steps/step_simulator.hpp"
#include "tests/chakra/chakra_helpers.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;
using namespace paradyse::testing;

namespace {

// The step written to `dir` and read back, compute nodes at their durations or priced.
chakra::ImportedJob round_trip(const steps::StepPrograms& step, const hw::ClusterSpec& cluster,
                               const TempDir& dir, bool price_compute) {
  chakra::write_chakra_traces(step.programs, cluster, {"round trip", step.static_bytes}, dir.file("step"),
                              dir.file("groups.json"));
  return chakra::read_chakra_traces(dir.file("step"), dir.file("groups.json"),
                                    {.price_compute = price_compute});
}

}  // namespace

TEST_CASE("export, import, simulate: the time of the same plan within 1 %", "[chakra]") {
  const ModelSpec model = load_model("gpt-8l");
  struct Case {
    const Strategy* strategy;
    int nodes;
  };
  for (const Case& c : {Case{&megatron_ts(), 1}, Case{&ulysses_z(), 1}, Case{&megatron_cz(), 2}}) {
    INFO(c.strategy->name() << " on " << c.nodes << " node(s)");
    const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", c.nodes);
    const TempDir dir;
    steps::StepSimulator simulator(model, cluster);
    const Plan plan = uniform_plan(*c.strategy, model.num_layers);
    const sim::SimulationResult direct = simulator.simulate(plan, {.tokens = 16384});
    const steps::StepPrograms step = steps::trace_plan_step(model, cluster, plan, {.tokens = 16384});
    REQUIRE(static_cast<int>(step.programs.size()) == 8 * c.nodes);
    for (bool priced : {false, true}) {
      INFO((priced ? "priced on the cluster" : "recorded durations"));
      chakra::ImportedJob job = round_trip(step, cluster, dir, priced);
      const sim::SimulationResult imported =
          simulator.simulator().run(std::move(job.programs), job.static_bytes);
      CHECK(imported.iteration_time_s == Approx(direct.iteration_time_s).epsilon(0.01));
      CHECK(imported.peak_memory_bytes == Approx(direct.peak_memory_bytes).epsilon(1e-9));
      CHECK(imported.flows == direct.flows);
      CHECK(imported.kernels == direct.kernels);
    }
  }
}

TEST_CASE("export, import, simulate: activation offload's copies as memory nodes, the same time",
          "[chakra]") {
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const TempDir dir;
  steps::StepSimulator simulator(model, cluster);
  const Plan plan = uniform_plan(ulysses_z(), model.num_layers, Recompute::offload);
  const sim::SimulationResult direct = simulator.simulate(plan, {.tokens = 65536});
  const steps::StepPrograms step = steps::trace_plan_step(model, cluster, plan, {.tokens = 65536});
  chakra::ImportedJob job = round_trip(step, cluster, dir, true);
  const auto copies = [](const Program& program) {
    std::vector<std::pair<Kernel, double>> out;
    for (const Op& op : program.ops)
      if (op.kind == OpKind::host_copy && op.stream == Stream::copy)
        out.emplace_back(op.kernel, op.size_bytes);
    return out;
  };
  REQUIRE(copies(step.programs[0]).size() == static_cast<std::size_t>(2 * (model.num_layers - 1)));
  CHECK(copies(job.programs[0]) == copies(step.programs[0]));
  const sim::SimulationResult imported = simulator.simulator().run(std::move(job.programs), job.static_bytes);
  CHECK(imported.iteration_time_s == Approx(direct.iteration_time_s).epsilon(0.01));
  CHECK(imported.peak_memory_bytes == Approx(direct.peak_memory_bytes).epsilon(1e-9));
  REQUIRE(direct.host_peak_bytes > 0);
  CHECK(imported.host_peak_bytes == direct.host_peak_bytes);
}

TEST_CASE("export, import, simulate: a grouped step's time within 1 %", "[chakra]") {
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const TempDir dir;
  steps::StepSimulator simulator(model, cluster);
  const GroupedStepSpec spec = evaluation::parse_grouped_step("4:8K,2:4K,2:2K+2K/8:16K", model,
                                                              uniform_plan(ulysses_z(), model.num_layers));
  const sim::SimulationResult direct = simulator.simulate_grouped(spec);
  chakra::ImportedJob job =
      round_trip(steps::trace_grouped_step_programs(spec, cluster), cluster, dir, false);
  const sim::SimulationResult imported = simulator.simulator().run(std::move(job.programs), job.static_bytes);
  CHECK(imported.iteration_time_s == Approx(direct.iteration_time_s).epsilon(0.01));
  CHECK(imported.peak_memory_bytes == Approx(direct.peak_memory_bytes).epsilon(1e-9));
}

TEST_CASE("import: durations recorded for another cluster are kept, and priced ones follow the cluster",
          "[chakra]") {
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec a100 = hw::load_cluster("dgx-a100");
  const hw::ClusterSpec h100 = hw::load_cluster("dgx-h100");
  const TempDir dir;
  const steps::StepPrograms step =
      steps::trace_plan_step(model, a100, uniform_plan(megatron_ts(), 8), {.tokens = 8192});
  steps::StepSimulator simulator(model, h100);
  chakra::ImportedJob recorded = round_trip(step, a100, dir, false);
  chakra::ImportedJob priced = round_trip(step, a100, dir, true);
  const double recorded_s =
      simulator.simulator().run(std::move(recorded.programs), recorded.static_bytes).iteration_time_s;
  const double priced_s =
      simulator.simulator().run(std::move(priced.programs), priced.static_bytes).iteration_time_s;
  const double h100_s = simulator.simulate(uniform_plan(megatron_ts(), 8), {.tokens = 8192}).iteration_time_s;
  CHECK(priced_s == Approx(h100_s).epsilon(0.01));
  CHECK(recorded_s > 1.3 * priced_s);  // the A100's compute, on the H100's network
}
