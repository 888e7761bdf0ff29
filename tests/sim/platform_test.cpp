// The platform holds only the nodes a job uses (sim/platform.hpp): memory follows the degree, not the
// cluster's size, and the nodes left out change nothing, the spine's bandwidth included.
#include <catch2/catch.hpp>

#include "common/units.hpp"
#include "steps/step_simulator.hpp"
#include "strategies/library.hpp"
#include "strategies/model.hpp"
#include "tests/sim/sim_helpers.hpp"

using namespace paradyse;

TEST_CASE("simulator: on a 1000-node cluster a job of 8 GPUs builds one node, and more when it grows",
          "[sim]") {
  sim::Simulator simulator(hw::load_cluster("dgx-a100", 1000));
  CHECK(simulator.built_gpus() == 0);  // nothing before the first job
  const double S = 64 * kMiB;
  const double eight = simulator.run(testing::lone_collective(OpKind::all_gather, 8, S)).iteration_time_s;
  CHECK(simulator.built_gpus() == 8);
  CHECK(eight > 0);

  const double twenty = simulator.run(testing::lone_collective(OpKind::all_gather, 20, S)).iteration_time_s;
  CHECK(simulator.built_gpus() == 24);  // whole nodes
  CHECK(twenty > eight);                // across nodes, on the NICs

  // A smaller job after a larger one runs on the platform already built, with the same result.
  CHECK(simulator.run(testing::lone_collective(OpKind::all_gather, 8, S)).iteration_time_s ==
        Approx(eight).epsilon(1e-12));
  CHECK(simulator.built_gpus() == 24);
  CHECK(simulator.transfer_s({{0, 8 * 999 + 7, S}})[0] > 0);  // the cluster's last GPU
  CHECK(simulator.built_gpus() == 8000);
}

TEST_CASE("simulator: the nodes a job does not use change nothing", "[sim]") {
  const ModelSpec model = load_model("gpt-8l");
  for (const Strategy* strategy : {&megatron_cz(), &ulysses_z()}) {  // rings; all-to-all through the spine
    const Plan plan = uniform_plan(*strategy, model.num_layers);
    const steps::EstimateRequest request{.tokens = 16384, .degree = 16};
    sim::SimulationResult two, hundred;
    {
      steps::StepSimulator simulator(model, hw::load_cluster("dgx-a100", 2));
      two = simulator.simulate(plan, request);
    }
    {
      steps::StepSimulator simulator(model, hw::load_cluster("dgx-a100", 100));
      hundred = simulator.simulate(plan, request);
      CHECK(simulator.simulator().built_gpus() == 16);
    }
    INFO(strategy->name());
    CHECK(two.flows > 0);
    CHECK(hundred.flows == two.flows);
    CHECK(hundred.iteration_time_s == Approx(two.iteration_time_s).epsilon(1e-12));
    CHECK(hundred.per_rank.front().exposed_comm_s ==
          Approx(two.per_rank.front().exposed_comm_s).epsilon(1e-12));
  }
}

TEST_CASE("simulator: the spine's uplinks carry the cluster's real node count, not the nodes built",
          "[sim]") {
  const double S = 64 * kMiB, nic = 10e9;
  // 8 nodes of 2 GPUs: each rail's uplink carries 8 NICs' worth over 4, two NICs: a flow between rails
  // streams at its NIC's rate though only nodes 0 and 1 are built (from those two, half a NIC).
  hw::ClusterSpec cluster = testing::flat_cluster(2, 8, 100e9, nic);
  cluster.spine_oversubscription = 4;
  sim::Simulator simulator(cluster);
  const double hop = cluster.inter_node.hop_latency_s();
  CHECK(simulator.transfer_s({{0, 3, S}})[0] == Approx(S / nic + hop).epsilon(1e-6));
  CHECK(simulator.built_gpus() == 4);
}

TEST_CASE("simulator: a cluster of 100000 nodes simulates a job of one node", "[sim]") {
  const ModelSpec model = load_model("gpt-8l");
  const Plan plan = uniform_plan(megatron_ts(), model.num_layers);
  double one = 0;
  {
    steps::StepSimulator simulator(model, hw::load_cluster("dgx-a100", 1));
    one = simulator.simulate(plan, {.tokens = 4096, .degree = 8}).iteration_time_s;
  }
  steps::StepSimulator simulator(model, hw::load_cluster("dgx-a100", 100000));
  CHECK(simulator.simulate(plan, {.tokens = 4096, .degree = 8}).iteration_time_s ==
        Approx(one).epsilon(1e-12));
  CHECK(simulator.simulator().built_gpus() == 8);
}
