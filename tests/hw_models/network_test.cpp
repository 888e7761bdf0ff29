// hw_models/network.cpp: routes from a cluster file's network graph, and bad graphs refused naming
// the file and the element.
#include "hw_models/network.hpp"

#include <catch2/catch.hpp>

#include <set>

#include "common/errors.hpp"
#include "hw_models/cluster.hpp"
#include "tests/hw_models/network_files.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;
using Catch::Matchers::Contains;
using testing::a100_with_network;

namespace {

// The names of the vertices a route passes, from its first GPU to its last.
std::vector<std::string> path(const hw::Network& network, int from, int to) {
  std::vector<std::string> names{network.vertex_name(from)};
  for (const hw::RouteHop& hop : network.route(from, to)) {
    const hw::NetworkLink& link = network.links()[static_cast<std::size_t>(hop.link)];
    names.push_back(network.vertex_name(hop.forward ? link.b : link.a));
  }
  return names;
}

std::string network_error(const std::string& path, int nodes = 1) {
  try {
    hw::load_cluster(path, nodes);
  } catch (const InputError& error) {
    return error.what();
  }
  FAIL("no error for " + path);
  return "";
}

}  // namespace

TEST_CASE("network: routes are the shortest paths through switches, GPUs never forwarding", "[hw_models]") {
  testing::TempDir dir;
  const hw::ClusterSpec a100 = hw::load_cluster("dgx-a100");
  const hw::ClusterSpec cluster =
      hw::load_cluster(dir.write("fat-tree.json", a100_with_network(testing::rail_fat_tree(a100, 2, 1))));
  REQUIRE(cluster.network);
  CHECK(cluster.num_nodes == 2);  // the graph's, when --nodes is left at one
  const hw::Network& network = *cluster.network;
  CHECK(network.num_gpus() == 16);
  CHECK(path(network, 0, 1) == std::vector<std::string>{"gpu0", "nvswitch0", "gpu1"});
  CHECK(path(network, 0, 8) == std::vector<std::string>{"gpu0", "leaf0", "gpu8"});
  CHECK(path(network, 0, 9) == std::vector<std::string>{"gpu0", "leaf0", "spine", "leaf1", "gpu9"});
  CHECK(path(network, 9, 0) == std::vector<std::string>{"gpu9", "leaf1", "spine", "leaf0", "gpu0"});
  CHECK(network.route(3, 3).empty());
  // Through gpu1 (nvswitch0, gpu1, leaf1) the path to gpu9 would be as short: GPUs do not forward.
  for (int from = 0; from < 16; ++from)
    for (int to = 0; to < 16; ++to) {
      const std::vector<std::string> names = path(network, from, to);
      for (std::size_t i = 1; i + 1 < names.size(); ++i) CHECK(names[i].rfind("gpu", 0) != 0);
    }
}

TEST_CASE("network: equal routes are spread over the pairs, the same route for a pair every time",
          "[hw_models]") {
  // Two nodes of 8 GPUs under one leaf each; two spines join the leaves.
  json_input::Json block = testing::network_block(2);
  block["switches"] = {"leaf0", "leaf1", "spine0", "spine1"};
  for (int gpu = 0; gpu < 16; ++gpu)
    testing::add_link(block, "gpu" + std::to_string(gpu), gpu < 8 ? "leaf0" : "leaf1", 25e9, 1e-6);
  for (const char* leaf : {"leaf0", "leaf1"})
    for (const char* spine : {"spine0", "spine1"}) testing::add_link(block, leaf, spine, 100e9, 1e-6);
  testing::TempDir dir;
  const hw::ClusterSpec cluster = hw::load_cluster(dir.write("ecmp.json", a100_with_network(block)));
  std::set<std::string> spines;
  for (int from = 0; from < 8; ++from)
    for (int to = 8; to < 16; ++to) {
      const std::vector<std::string> names = path(*cluster.network, from, to);
      REQUIRE(names.size() == 5);
      spines.insert(names[2]);
      CHECK(path(*cluster.network, from, to) == names);
    }
  CHECK(spines == std::set<std::string>{"spine0", "spine1"});
}

TEST_CASE("network: of equally short routes the widest is taken, NVLink before a leaf's NICs",
          "[hw_models]") {
  // Every GPU of a node on its NVSwitch and, through its NIC, on the node's leaf: two GPUs of a node
  // are two links apart either way, and talk over NVLink.
  testing::TempDir dir;
  const hw::ClusterSpec a100 = hw::load_cluster("dgx-a100");
  const hw::ClusterSpec cluster =
      hw::load_cluster(dir.write("tor.json", a100_with_network(testing::top_of_rack_tree(a100, 2, 2))));
  for (int node = 0; node < 2; ++node)
    for (int from = 8 * node; from < 8 * node + 8; ++from)
      for (int to = 8 * node; to < 8 * node + 8; ++to)
        if (from != to)
          CHECK(path(*cluster.network, from, to) ==
                std::vector<std::string>{"gpu" + std::to_string(from), "nvswitch" + std::to_string(node),
                                         "gpu" + std::to_string(to)});
  // Between the nodes only the leaves lead on.
  CHECK(path(*cluster.network, 0, 9) == std::vector<std::string>{"gpu0", "leaf0", "spine", "leaf1", "gpu9"});
}

TEST_CASE("network: bad graphs are refused naming the file and the element", "[hw_models]") {
  testing::TempDir dir;
  const hw::ClusterSpec a100 = hw::load_cluster("dgx-a100");
  const json_input::Json good = testing::rail_fat_tree(a100, 2, 1);
  auto written = [&](const std::string& name, auto&& edit) {
    json_input::Json block = good;
    edit(block);
    return dir.write(name, a100_with_network(block));
  };
  SECTION("an unknown node in a link") {
    const std::string file =
        written("unknown.json", [](auto& block) { block["links"][3]["between"][1] = "leaf9"; });
    const std::string error = network_error(file);
    CHECK_THAT(error, Contains(file) && Contains("network.links[3].between[1]") && Contains("\"leaf9\""));
  }
  SECTION("a GPU beyond the nodes the graph joins") {
    const std::string file =
        written("beyond.json", [](auto& block) { block["links"][0]["between"][0] = "gpu16"; });
    CHECK_THAT(network_error(file), Contains("network.links[0].between[0]") && Contains("gpu0 to gpu15"));
  }
  SECTION("a link with zero bandwidth") {
    const std::string file =
        written("zero.json", [](auto& block) { block["links"][5]["bytes_per_second"] = 0; });
    CHECK_THAT(network_error(file), Contains(file) && Contains("network.links[5].bytes_per_second"));
  }
  SECTION("a GPU with no route") {
    // gpu13's NVLink and NIC links (13 and 29) removed: nothing reaches it.
    const std::string file = written("cut.json", [](auto& block) {
      block["links"].erase(29);
      block["links"].erase(13);
    });
    CHECK_THAT(network_error(file), Contains(file) && Contains("gpu13 with no route"));
  }
  SECTION("a GPU reached only through another GPU") {
    json_input::Json block = testing::network_block(1);
    block["switches"] = {"a", "b"};
    for (int gpu = 0; gpu < 8; ++gpu)
      testing::add_link(block, "gpu" + std::to_string(gpu), gpu < 7 ? "a" : "b", 1e9, 0);
    testing::add_link(block, "gpu6", "b", 1e9, 0);  // gpu6 touches both switches, but does not forward
    CHECK_THAT(network_error(dir.write("forward.json", a100_with_network(block))),
               Contains("gpu7 with no route"));
  }
  SECTION("a switch named twice, or like a GPU") {
    CHECK_THAT(network_error(written("twice.json", [](auto& block) { block["switches"][1] = "nvswitch0"; })),
               Contains("network.switches[1]") && Contains("\"nvswitch0\""));
    CHECK_THAT(network_error(written("gpu-named.json", [](auto& block) { block["switches"][0] = "gpu3"; })),
               Contains("network.switches[0]"));
  }
  SECTION("a link from a node to itself") {
    const std::string file = written("loop.json", [](auto& block) {
      block["links"][2]["between"] = {"spine", "spine"};
    });
    CHECK_THAT(network_error(file), Contains("network.links[2].between") && Contains("spine twice"));
  }
  SECTION("--nodes other than the graph's") {
    const std::string file = written("fixed.json", [](auto&) {});
    CHECK(hw::load_cluster(file, 2).num_gpus() == 16);
    CHECK_THAT(network_error(file, 4), Contains("expected 2 nodes") && Contains("got 4"));
  }
  SECTION("a missing source") {
    const std::string file =
        written("unsourced.json", [](auto& block) { block["source"].erase("latency_seconds"); });
    CHECK_THAT(network_error(file), Contains("network.source"));
  }
}
