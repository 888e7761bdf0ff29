// The simulator against the analytic model on whole iterations (issue acceptance 2 and 3).
//
// Both price the same traced ops with the same kernel and collective times, so what separates them is
// what the analytic model leaves out: it prices every phase (a layer's forward, its backward...) as if
// it started on idle streams, so it never overlaps one layer's communication with the previous layer's
// compute (the simulator does: ZeRO-3 weight gathers of layer i+1 run behind layer i), and it has no
// contention (the simulator shares links between concurrent flows). The first makes the simulator
// faster, the second slower. Measured on gpt-8l, dgx-a100, degree 8, at 4K, 32K and 128K tokens:
// differences within 4.2 %, none above 10 %; peak memory identical (both fold the same allocations in
// issue order).
#include <catch2/catch.hpp>

#include "steps/estimate.hpp"
#include "steps/step_simulator.hpp"
#include "strategies/library.hpp"
#include "tests/hw_models/network_files.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;

TEST_CASE("simulator agrees with the analytic model for every strategy at several lengths", "[sim]") {
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  steps::Estimator estimator(model, cluster);
  steps::StepSimulator simulator(model, cluster);
  for (const Strategy* strategy : strategies_for(model, 8)) {
    for (int64_t tokens : {4096, 32768, 131072}) {
      CAPTURE(strategy->name(), tokens);
      const Plan plan = uniform_plan(*strategy, model.num_layers);
      const steps::Estimate estimate = estimator.estimate(plan, {.tokens = tokens});
      const sim::SimulationResult simulated = simulator.simulate(plan, {.tokens = tokens});
      CHECK(simulated.iteration_time_s == Approx(estimate.time.total_s).epsilon(0.05));
      CHECK(simulated.peak_memory_bytes == Approx(estimate.memory.peak_bytes).epsilon(1e-12));
      CHECK(simulated.oom == !estimate.fits);
      CHECK(simulated.padded_tokens == estimate.padded_tokens);
      // Only contention makes the simulator slower than the analytic model, and no strategy but metp
      // (whose ring steps run beside its weight broadcasts) has concurrent flows to speak of.
      if (strategy->name() != "metp") CHECK(simulated.iteration_time_s <= estimate.time.total_s * 1.001);
      // Every rank does the same work in these symmetric strategies.
      for (const sim::RankResult& rank : simulated.per_rank) {
        CHECK(rank.compute_s == Approx(simulated.per_rank[0].compute_s).epsilon(1e-9));
        CHECK(rank.compute_s + rank.exposed_comm_s + rank.host_bound_s + rank.idle_s ==
              Approx(simulated.iteration_time_s).epsilon(1e-9));
      }
      // The same kernels, but for the four that make the step's inputs (tokens, targets), its loss
      // and its gradient norm accumulators, which the analytic model counts as present before the step.
      const double inputs = 4 * cluster.gpu.kernel_launch_s + 1e-6;
      CHECK(simulated.per_rank[0].compute_s == Approx(estimate.time.compute_s).margin(inputs));
      CHECK(simulated.per_rank[0].compute_s >= estimate.time.compute_s);
    }
  }
}

TEST_CASE("simulator agrees with the analytic model when collectives slow the compute beside them", "[sim]") {
  const ModelSpec model = load_model("gpt-8l");
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  cluster.intra_node.compute_contention = 0.5;
  steps::Estimator contended(model, cluster), free(model, hw::load_cluster("dgx-a100"));
  steps::StepSimulator simulator(model, cluster);
  for (const Strategy* strategy : strategies_for(model, 8)) {
    CAPTURE(strategy->name());
    const Plan plan = uniform_plan(*strategy, model.num_layers);
    const steps::Estimate estimate = contended.estimate(plan, {.tokens = 16384});
    const sim::SimulationResult simulated = simulator.simulate(plan, {.tokens = 16384});
    CHECK(simulated.iteration_time_s == Approx(estimate.time.total_s).epsilon(0.05));
    // The ZeRO-3 strategies gather the next layer's weights beside this layer's compute.
    if (strategy->name() == "ulysses_z")
      CHECK(estimate.time.total_s > 1.02 * free.estimate(plan, {.tokens = 16384}).time.total_s);
  }
}

TEST_CASE("simulator agrees with the analytic model on a global batch of several micro-batches", "[sim]") {
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  steps::Estimator estimator(model, cluster);
  steps::StepSimulator simulator(model, cluster);
  for (const Strategy* strategy : {&megatron_ts(), &ulysses_z()}) {
    CAPTURE(strategy->name());
    const Plan plan = uniform_plan(*strategy, model.num_layers);
    const steps::EstimateRequest request{.tokens = 4096, .micro_batches = 3};
    const steps::Estimate estimate = estimator.estimate(plan, request);
    const sim::SimulationResult simulated = simulator.simulate(plan, request);
    CHECK(simulated.iteration_time_s == Approx(estimate.time.total_s).epsilon(0.05));
    CHECK(simulated.peak_memory_bytes == Approx(estimate.memory.peak_bytes).epsilon(1e-12));
    CHECK(simulated.micro_batches == 3);
    // Three micro-batches, one optimizer step: well under three single steps.
    const double single = simulator.simulate(plan, {.tokens = 4096}).iteration_time_s;
    CHECK(simulated.iteration_time_s < 3 * single);
    CHECK(simulated.iteration_time_s > 2.5 * single);
  }
}

TEST_CASE("simulator agrees with the analytic model past one node, where the network routes the flows",
          "[sim]") {
  // Both route a collective's flows, and its sibling groups', on the same links (the analytic model
  // from its most loaded link): the 2-D strategies' rings with several GPUs in a node, and an
  // all-to-all up an oversubscribed spine, are priced alike. Measured at 16K: within 3.0 % on 4 nodes
  // of the built-in fat tree and on two nodes under 2:1 top-of-rack leaves.
  const ModelSpec model = load_model("gpt-8l");
  testing::TempDir dir;
  const hw::ClusterSpec a100 = hw::load_cluster("dgx-a100");
  const std::string tor =
      dir.write("tor.json", testing::a100_with_network(testing::top_of_rack_tree(a100, 2, 2)));
  for (const hw::ClusterSpec& cluster : {hw::load_cluster("dgx-a100", 4), hw::load_cluster(tor)}) {
    CAPTURE(cluster.name);
    steps::Estimator estimator(model, cluster);
    steps::StepSimulator simulator(model, cluster);
    for (const Strategy* strategy : strategies_for(model, cluster.num_gpus())) {
      CAPTURE(strategy->name());
      const Plan plan = uniform_plan(*strategy, model.num_layers);
      const steps::Estimate estimate = estimator.estimate(plan, {.tokens = 16384});
      const sim::SimulationResult simulated = simulator.simulate(plan, {.tokens = 16384});
      CHECK(simulated.iteration_time_s == Approx(estimate.time.total_s).epsilon(0.05));
      CHECK(simulated.peak_memory_bytes == Approx(estimate.memory.peak_bytes).epsilon(1e-12));
    }
  }
}

TEST_CASE("simulator: a mixed plan lies between its pure plans in proportion to the layer counts", "[sim]") {
  const ModelSpec model = load_model("gpt-8l");
  steps::StepSimulator simulator(model, hw::ClusterSpec(hw::load_cluster("dgx-a100")));
  const int64_t tokens = 32768;
  const double ts = simulator.simulate(uniform_plan(megatron_ts(), 8), {.tokens = tokens}).iteration_time_s;
  const double metp_time = simulator.simulate(uniform_plan(metp(), 8), {.tokens = tokens}).iteration_time_s;
  REQUIRE(metp_time > ts * 1.2);  // far enough apart for the proportion to mean something
  for (int metp_layers : {2, 4, 6}) {
    Plan plan;
    // Interleaved, so that the plan switches strategy at most layers.
    for (int layer = 0; layer < 8; ++layer)
      plan.push_back({layer % 4 < metp_layers / 2 ? &metp() : &megatron_ts(), Recompute::none});
    const sim::SimulationResult mixed = simulator.simulate(plan, {.tokens = tokens});
    CAPTURE(metp_layers, mixed.plan);
    CHECK(mixed.iteration_time_s > ts);
    CHECK(mixed.iteration_time_s < metp_time);
    const double proportional = ts + (metp_time - ts) * metp_layers / 8.0;
    CHECK(mixed.iteration_time_s == Approx(proportional).epsilon(0.02));
  }
}

TEST_CASE("simulator: running out of memory is a result naming the rank, layer and op", "[sim]") {
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  steps::StepSimulator simulator(model, cluster);
  // colossal_z materialises the full attention scores: out of memory from 16K (see the regimes test).
  const sim::SimulationResult result = simulator.simulate(uniform_plan(colossal_z(), 8), {.tokens = 32768});
  REQUIRE(result.oom);
  REQUIRE(result.oom_at.has_value());
  CHECK(result.peak_memory_bytes > result.capacity_bytes);
  CHECK(result.oom_at->bytes > result.oom_at->capacity);
  CHECK(result.oom_at->capacity == cluster.tensor_capacity_bytes());
  CHECK(result.oom_at->layer == 0);
  CHECK(result.oom_at->phase == Phase::layer_forward);
  CHECK(!result.oom_at->op.empty());
  CHECK(result.iteration_time_s > 0);  // the time is still reported

  const sim::SimulationResult fits = simulator.simulate(uniform_plan(metp(), 8), {.tokens = 32768});
  CHECK(!fits.oom);
  CHECK(!fits.oom_at.has_value());
}

TEST_CASE("simulator: the same inputs give the same numbers", "[sim]") {
  const ModelSpec model = load_model("gpt-8l");
  steps::StepSimulator simulator(model, hw::load_cluster("dgx-a100"));
  const Plan plan = uniform_plan(megatron_cz(), 8);
  const sim::SimulationResult first = simulator.simulate(plan, {.tokens = 20000});
  const sim::SimulationResult second = simulator.simulate(plan, {.tokens = 20000});
  CHECK(first.iteration_time_s == Approx(second.iteration_time_s).epsilon(1e-12));
  CHECK(first.events() == second.events());
  CHECK(first.peak_memory_bytes == second.peak_memory_bytes);
}
