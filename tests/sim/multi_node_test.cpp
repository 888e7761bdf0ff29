// Routes between nodes: NVLink inside a node, one NIC per GPU between nodes, the fat tree's spine
// between rails (issue acceptance 5), and NCCL's rail-aligned rings.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "common/units.hpp"
#include "costmodel/collective_flows.hpp"
#include "costmodel/op_time.hpp"
#include "steps/estimate.hpp"
#include "steps/step_simulator.hpp"
#include "strategies/library.hpp"
#include "tests/sim/sim_helpers.hpp"

using namespace paradyse;

namespace {}

TEST_CASE("simulator: on 2x dgx-a100, traffic between nodes takes a NIC and is slower than NVLink", "[sim]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 2);
  REQUIRE(cluster.num_gpus() == 16);
  const double S = 256 * kMiB;
  const double nvlink = cluster.intra_node.peak_bus_bandwidth(), nic = cluster.inter_node.bytes_per_second;
  const double intra_hop = cluster.intra_node.hop_latency_s();
  const double inter_hop = cluster.inter_node.hop_latency_s();
  sim::Simulator simulator(cluster);

  const std::vector<double> seconds = simulator.transfer_s({{0, 1, S}});
  const double same_node = seconds[0];
  const double same_rail = simulator.transfer_s({{0, 8, S}})[0];   // GPU 0 of each node: rail 0
  const double other_rail = simulator.transfer_s({{0, 9, S}})[0];  // through the spine
  CHECK(same_node == Approx(S / nvlink + intra_hop).epsilon(1e-6));
  CHECK(same_rail == Approx(S / nic + inter_hop).epsilon(1e-6));
  CHECK(other_rail == Approx(S / nic + inter_hop).epsilon(1e-6));  // non-blocking spine
  CHECK(same_rail > 5 * same_node);

  SECTION("the GPUs of a node each have their own NIC") {
    const std::vector<double> rails = simulator.transfer_s({{0, 8, S}, {1, 9, S}});
    CHECK(rails[0] == Approx(same_rail).epsilon(1e-6));
    CHECK(rails[1] == Approx(same_rail).epsilon(1e-6));
    const std::vector<double> one_nic = simulator.transfer_s({{0, 8, S}, {0, 9, S}});
    CHECK(one_nic[0] == Approx(2 * S / nic + inter_hop).epsilon(1e-6));
  }
}

TEST_CASE("simulator: an oversubscribed spine slows traffic between rails, not within one", "[sim]") {
  const double S = 64 * kMiB, nic = 10e9;
  // 2 nodes of 2 GPUs: each rail's spine uplink carries 2 NICs' worth over 4, half a NIC.
  hw::ClusterSpec cluster = testing::flat_cluster(2, 2, 100e9, nic);
  cluster.spine_oversubscription = 4;
  sim::Simulator simulator(cluster);
  const double hop = cluster.inter_node.hop_latency_s();
  CHECK(simulator.transfer_s({{0, 2, S}})[0] == Approx(S / nic + hop).epsilon(1e-6));
  CHECK(simulator.transfer_s({{0, 3, S}})[0] == Approx(S / (nic / 2) + hop).epsilon(1e-6));
}

TEST_CASE(
    "an oversubscribed spine slows an all-to-all across nodes as much in the analytic model as simulated",
    "[sim]") {
  // 2 nodes of dgx-a100: 7 of the 8 flows a GPU sends to the other node go to other rails, up a spine
  // uplink of 2 NICs' worth over 4: each at 1/28 of a NIC instead of 1/8.
  const double S = 256 * kMiB;
  const std::vector<Program> programs = testing::lone_collective(OpKind::all_to_all, 16, S);
  const auto times = [&](double oversubscription) {
    hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 2);
    cluster.spine_oversubscription = oversubscription;
    const double latency = cluster.inter_node.hop_latency_s();  // one hop: all pairs at once
    // The analytic model waits for its longest route, an NVLink one inside a node.
    const double longest_route_s = std::max(latency, cluster.intra_node.hop_latency_s());
    sim::Simulator simulator(cluster);
    return std::pair{simulator.run(programs).iteration_time_s - latency,
                     costmodel::OpTimer(cluster, 16).seconds(programs[0].ops[0]) - longest_route_s};
  };
  const auto [simulated_1, analytic_1] = times(1);
  const auto [simulated_4, analytic_4] = times(4);
  CHECK(simulated_4 / simulated_1 == Approx(3.5).epsilon(0.01));
  CHECK(analytic_4 / analytic_1 == Approx(3.5).epsilon(1e-9));
}

TEST_CASE("simulator: a 16-GPU collective runs one ring per NIC and is slower than an 8-GPU one", "[sim]") {
  const hw::ClusterSpec two = hw::load_cluster("dgx-a100", 2);
  REQUIRE(costmodel::ring_channels(16, two) == 8);
  REQUIRE(costmodel::ring_channels(8, two) == 1);
  std::set<std::pair<int, int>> crossings;
  for (int c = 0; c < 8; ++c) {
    const std::vector<int> order = costmodel::ring_order(16, two, c);
    CHECK(std::set<int>(order.begin(), order.end()).size() == 16);  // every rank once
    for (std::size_t i = 0; i < order.size(); ++i) {
      const int from = order[i], to = order[(i + 1) % order.size()];
      if (from / 8 == to / 8) continue;
      CHECK(from % 8 == to % 8);  // a crossing stays on its rail
      crossings.insert({from, to});
    }
  }
  CHECK(crossings.size() == 16);  // each NIC sends once and receives once over the 8 rings

  const double S = 1024 * kMiB;
  double eight = 0, sixteen = 0;
  {
    sim::Simulator simulator(two);
    eight = simulator.run(testing::lone_collective(OpKind::all_gather, 8, S)).iteration_time_s;
    sixteen = simulator.run(testing::lone_collective(OpKind::all_gather, 16, S)).iteration_time_s;
  }
  CHECK(sixteen > 1.1 * eight);
  // Eight rings share the bytes, each crossing nodes on its own NIC: the NICs' total rate.
  const double bus = 15.0 / 16 * S;
  CHECK(sixteen == Approx(bus / two.inter_node.streaming_bandwidth(S) + 15 * two.inter_node.hop_latency_s())
                       .epsilon(0.02));
}

TEST_CASE("simulator: a 1,024-GPU ring collective is 2,048 flows and takes NCCL's measured time", "[sim]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 128);
  const double S = 4096 * kMiB;
  for (OpKind kind : {OpKind::all_gather, OpKind::reduce_scatter}) {
    CAPTURE(to_string(kind));
    const std::vector<Program> programs = testing::lone_collective(kind, 1024, S);
    sim::Simulator simulator(cluster);
    const sim::SimulationResult result = simulator.run(programs);
    // Eight rings share each node's 8 NVLink edges (1,024 flows); each crosses its own NIC between
    // nodes (8 × 128 flows).
    CHECK(result.flows == 2048);
    CHECK(result.analytic_collectives == 0);
    CHECK(result.iteration_time_s ==
          Approx(costmodel::OpTimer(cluster, 1024).seconds(programs[0].ops[0])).epsilon(0.02));
  }
}

TEST_CASE("simulator: a strategy over two nodes pays for the NICs", "[sim]") {
  const ModelSpec model = load_model("gpt-8l");
  double one = 0, two = 0;
  {
    steps::StepSimulator simulator(model, hw::load_cluster("dgx-a100", 2));
    const Plan plan = uniform_plan(megatron_cz(), 8);
    one = simulator.simulate(plan, {.tokens = 65536, .degree = 8}).per_rank[0].exposed_comm_s;
    two = simulator.simulate(plan, {.tokens = 65536, .degree = 16}).per_rank[0].exposed_comm_s;
  }
  // Ring attention's K/V steps cross nodes on one NIC each at degree 16.
  CHECK(two > 3 * one);
}
