// The simulator on networks described as graphs (hw_models/network.hpp): the built-in fat tree
// written as a file simulates exactly as the built-in one, and an oversubscribed spine divides the
// bandwidth that crosses it.
#include <catch2/catch.hpp>

#include "common/units.hpp"
#include "steps/step_simulator.hpp"
#include "strategies/library.hpp"
#include "tests/hw_models/network_files.hpp"
#include "tests/sim/sim_helpers.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;

namespace {

struct Times {
  std::vector<double> collectives_s;  // a lone all-gather, all-to-all and all-reduce over 16 GPUs
  std::vector<double> transfers_s;    // concurrent transfers within a node, a rail and across rails
  double step_s = 0;                  // a step of every strategy on 16 GPUs
};

Times times(const hw::ClusterSpec& cluster) {
  const ModelSpec model = load_model("gpt-8l");
  steps::StepSimulator simulator(model, cluster);
  Times times;
  for (OpKind kind : {OpKind::all_gather, OpKind::all_to_all, OpKind::all_reduce})
    times.collectives_s.push_back(
        simulator.simulator().run(testing::lone_collective(kind, 16, 256 * kMiB)).iteration_time_s);
  const double S = 64 * kMiB;
  times.transfers_s =
      simulator.simulator().transfer_s({{0, 1, S}, {0, 8, S}, {1, 10, S}, {2, 11, S}, {12, 3, S}});
  for (const Strategy* strategy : all_strategies())
    times.step_s +=
        simulator.simulate(uniform_plan(*strategy, model.num_layers), {.tokens = 16384, .degree = 16})
            .iteration_time_s;
  return times;
}

// The same but for rounding (about 1e-10 apart): the two platforms create the same links in
// another order, so SimGrid's bandwidth-sharing solver sums them in another order.
void check_same(const Times& built_in, const Times& from_file) {
  REQUIRE(built_in.collectives_s.size() == from_file.collectives_s.size());
  for (std::size_t i = 0; i < built_in.collectives_s.size(); ++i)
    CHECK(from_file.collectives_s[i] == Approx(built_in.collectives_s[i]).epsilon(1e-9));
  for (std::size_t i = 0; i < built_in.transfers_s.size(); ++i)
    CHECK(from_file.transfers_s[i] == Approx(built_in.transfers_s[i]).epsilon(1e-9));
  CHECK(from_file.step_s == Approx(built_in.step_s).epsilon(1e-9));
}

}  // namespace

TEST_CASE("simulator: the built-in fat tree written as a network graph simulates the same times", "[sim]") {
  const double oversubscription = GENERATE(1.0, 2.0);
  CAPTURE(oversubscription);
  hw::ClusterSpec built_in = hw::load_cluster("dgx-a100", 2);
  built_in.spine_oversubscription = oversubscription;
  testing::TempDir dir;
  const hw::ClusterSpec from_file = hw::load_cluster(dir.write(
      "fat-tree.json", testing::a100_with_network(testing::rail_fat_tree(built_in, 2, oversubscription))));
  check_same(times(built_in), times(from_file));
}

TEST_CASE(
    "simulator: the dgx-h100-superpod preset's graph is the built-in rail-optimised fat tree of 32 nodes",
    "[sim]") {
  // A scalable unit: every NIC r on rail r's leaf, leaves non-blocking to the spine, which is what the
  // built-in tree of `dgx-h100 --nodes 32` builds.
  const hw::ClusterSpec superpod = hw::load_cluster("dgx-h100-superpod");
  REQUIRE(superpod.network);
  CHECK(superpod.num_gpus() == 256);
  check_same(times(hw::load_cluster("dgx-h100", 32)), times(superpod));
}

TEST_CASE("simulator: a 2:1 oversubscribed spine halves the bandwidth of an all-to-all across it", "[sim]") {
  // Two nodes, all eight NICs of each under one leaf: all the all-to-all's traffic between the nodes
  // crosses the spine. At 1:1 a leaf's uplink carries its eight NICs' worth, at 2:1 half of it.
  const hw::ClusterSpec a100 = hw::load_cluster("dgx-a100");
  testing::TempDir dir;
  auto across_s = [&](double oversubscription) {
    const hw::ClusterSpec cluster = hw::load_cluster(dir.write(
        "tor.json", testing::a100_with_network(testing::top_of_rack_tree(a100, 2, oversubscription))));
    sim::Simulator simulator(cluster);
    // Every GPU of node 0 sends S to every GPU of node 1 at once.
    const double S = 16 * kMiB;
    std::vector<sim::Transfer> transfers;
    for (int from = 0; from < 8; ++from)
      for (int to = 8; to < 16; ++to) transfers.push_back({from, to, S});
    const std::vector<double> seconds = simulator.transfer_s(transfers);
    return *std::max_element(seconds.begin(), seconds.end());
  };
  const double full = across_s(1), half = across_s(2);
  // 1:1: each NIC carries 8 transfers at 1/8 of its bandwidth; 2:1: the uplink carries 64 at 1/16.
  const double nic = a100.inter_node.bytes_per_second, hop = a100.inter_node.hop_latency_s();
  CHECK(full == Approx(8 * 16 * kMiB / nic + hop).epsilon(1e-6));
  CHECK(half - hop == Approx(2 * (full - hop)).epsilon(1e-6));
}

TEST_CASE("simulator: a network graph and --oversubscription are not given together", "[sim]") {
  testing::TempDir dir;
  hw::ClusterSpec cluster = hw::load_cluster(dir.write(
      "tree.json", testing::a100_with_network(testing::rail_fat_tree(hw::load_cluster("dgx-a100"), 2, 1))));
  cluster.spine_oversubscription = 2;
  CHECK_THROWS_WITH(sim::Simulator(cluster),
                    Catch::Matchers::Contains("oversubscription") && Catch::Matchers::Contains("graph"));
}
