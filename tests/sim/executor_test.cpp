// The executor reports its progress and runs collectives of many flows in time linear in their flows.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/units.hpp"
#include "costmodel/program_cost.hpp"
#include "program/tracing_backend.hpp"
#include "steps/step_simulator.hpp"
#include "strategies/library.hpp"
#include "strategies/model.hpp"
#include "tests/sim/sim_helpers.hpp"

using namespace paradyse;

TEST_CASE("simulator: progress goes through tracing then simulating, and changes no result", "[sim]") {
  const ModelSpec model = load_model("gpt-8l");
  const Plan plan = uniform_plan(megatron_cz(), model.num_layers);
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 2);
  sim::SimulationResult quiet;
  {
    steps::StepSimulator simulator(model, cluster);
    quiet = simulator.simulate(plan, {.tokens = 16384, .degree = 16});
  }
  struct Report {
    std::string phase;
    uint64_t done, total;
  };
  std::vector<Report> reports;
  sim::SimulationOptions options;
  options.progress = [&](std::string_view phase, uint64_t done, uint64_t total) {
    reports.push_back({std::string(phase), done, total});
  };
  steps::StepSimulator simulator(model, cluster, options);
  const sim::SimulationResult reported = simulator.simulate(plan, {.tokens = 16384, .degree = 16});
  // Equal but for rounding: SimGrid's clock goes on from the first Simulator's engine.
  CHECK(reported.iteration_time_s == Approx(quiet.iteration_time_s).epsilon(1e-12));
  CHECK(reported.events() == quiet.events());

  REQUIRE(reports.size() > 16);
  CHECK(reports.front().phase == "tracing");
  CHECK(reports.front().total == 16);
  CHECK(reports.back().phase == "simulating");
  bool simulating = false;
  uint64_t last_done = 0;
  for (const Report& r : reports) {
    CHECK(r.done <= r.total);
    if (r.phase == "simulating") {
      if (simulating) CHECK(r.done >= last_done);  // ops done only grow
      simulating = true;
      last_done = r.done;
    } else {
      CHECK_FALSE(simulating);  // no tracing after the simulation started
    }
  }
  CHECK(last_done > 0);
}

TEST_CASE("simulator: an all-to-all of 64 ranks simulates each of its 4032 flows", "[sim]") {
  // Below max_flows_per_collective every flow is simulated, none by the analytic model. (Its
  // speed, once 2 s for such an all-to-all when the executor waited on every flow in flight, is
  // measured by the large-simulation commands of docs/estimate-and-simulate.md, not here.)
  sim::Simulator simulator(hw::load_cluster("dgx-a100", 8));
  const sim::SimulationResult r = simulator.run(testing::lone_collective(OpKind::all_to_all, 64, 256 * kMiB));
  CHECK(r.flows == 64 * 63);
  CHECK(r.analytic_collectives == 0);
  CHECK(r.iteration_time_s > 0);
}

TEST_CASE("simulator: the host issues ops as the analytic list schedule says", "[sim]") {
  // Rank r's program: a chain of short adds, a waited all-gather, a large GEMM and a read of its result.
  auto program = [](int rank) {
    TracingBackend be(rank, 2);
    be.begin_phase(Phase::layer_forward, 0);
    Tensor x = be.zeros({1024}, DType::bf16);
    for (int i = 0; i < 20; ++i) x = be.add(x, x);
    Pending gathered = be.all_gather_async(x, 0);
    const Tensor w = be.parameter("w", {2048, 2048}, rank);
    const Tensor y = be.linear(be.linear(w, w), w);
    be.read_scalar(be.view(be.slice(be.view(y, {2048 * 2048}), 0, 0, 1), {1}));
    gathered.wait();
    be.add(x, x);
    return be.take_program();
  };
  const ModelSpec model = load_model("tiny-gpt");
  for (const auto& [dispatch_s, synchronous] :
       std::vector<std::pair<double, bool>>{{0, false}, {20e-6, false}, {20e-6, true}}) {
    INFO("dispatch " << dispatch_s << " s, synchronous " << synchronous);
    hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
    cluster.host = {dispatch_s, 2 * dispatch_s, synchronous, {}, {}, {}};
    const Program rank0 = program(0);
    const costmodel::OpTimer timer(cluster, 2);
    const double listed_s = costmodel::cost_phases(rank0, timer).at(0).cost.seconds;
    sim::Simulator simulator(cluster);
    const double simulated_s = simulator.run({rank0, program(1)}).iteration_time_s;
    // A step's time is a difference of SimGrid clock readings, and the clock carries on across the
    // simulations of one process: after other tests' (hundreds of simulated seconds) a reading is exact
    // to about 1e-13 s, a part in 10⁹ of this 0.18 ms step.
    CHECK(simulated_s == Approx(listed_s).epsilon(1e-9).margin(1e-12));
    if (dispatch_s > 0) CHECK(listed_s > 21 * dispatch_s);  // the chain is launch-bound
  }
}

TEST_CASE("simulator: a host that only some calls cost issues them as the list schedule says", "[sim]") {
  // No read of a value and no default dispatch cost: only the adds' own cost makes the host count.
  TracingBackend be(0, 1);
  be.begin_phase(Phase::layer_forward, 0);
  Tensor x = be.zeros({1024}, DType::bf16);
  for (int i = 0; i < 20; ++i) x = be.add(x, x);
  const Program program = be.take_program();
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  cluster.host = {0, 0, false, {{"add", 20e-6}}, {}, {}};
  const double listed_s = costmodel::cost_phases(program, costmodel::OpTimer(cluster, 1)).at(0).cost.seconds;
  CHECK(listed_s > 20 * 20e-6);  // the adds are launch-bound
  sim::Simulator simulator(cluster);
  const sim::SimulationResult simulated = simulator.run({program});
  CHECK(simulated.iteration_time_s == Approx(listed_s).epsilon(1e-9).margin(1e-12));
  // The GPU waits for each add's issue: the time the list schedule says it waits, and all the step's
  // time that is not its kernels'.
  const costmodel::SegmentCost listed =
      costmodel::cost_phases(program, costmodel::OpTimer(cluster, 1)).at(0).cost;
  const sim::RankResult& rank = simulated.per_rank.at(0);
  CHECK(rank.host_bound_s == Approx(listed.host_bound_s).epsilon(1e-9).margin(1e-12));
  CHECK(rank.host_bound_s > 0.9 * simulated.iteration_time_s);
  CHECK(rank.compute_s + rank.host_bound_s == Approx(simulated.iteration_time_s).epsilon(1e-9).margin(1e-12));
  CHECK(rank.idle_s == Approx(0).margin(1e-12));
}

TEST_CASE("simulator: a GPU-bound step waits for its host only until the host runs ahead", "[sim]") {
  // Two large GEMMs behind a 20 us dispatch each: the first waits for its issue, the second was issued
  // while the first ran.
  TracingBackend be(0, 1);
  be.begin_phase(Phase::layer_forward, 0);
  const Tensor w = be.parameter("w", {4096, 4096}, 0);
  be.linear(be.linear(w, w), w);
  const Program program = be.take_program();
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  cluster.host = {20e-6, 20e-6, false, {}, {}, {}};
  sim::Simulator simulator(cluster);
  const sim::SimulationResult simulated = simulator.run({program});
  const sim::RankResult& rank = simulated.per_rank.at(0);
  const costmodel::SegmentCost listed =
      costmodel::cost_phases(program, costmodel::OpTimer(cluster, 1)).at(0).cost;
  CHECK(rank.host_bound_s == Approx(listed.host_bound_s).epsilon(1e-9).margin(1e-12));
  CHECK(rank.host_bound_s < 0.05 * simulated.iteration_time_s);
}
