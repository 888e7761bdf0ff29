// hw_models/rail_fat_tree.cpp: the built-in network is, link for link and route for route, the
// two-level rail fat tree a cluster file would write as a graph (network_files.hpp names its
// switches in the same order, so both number their vertices alike).
#include "hw_models/rail_fat_tree.hpp"

#include <catch2/catch.hpp>

#include "hw_models/network.hpp"
#include "tests/hw_models/network_files.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;

namespace {

// A route as the vertices it passes and the bandwidth and latency of each link it crosses.
struct Passage {
  std::vector<int> vertices;
  std::vector<std::pair<double, double>> links;
  bool operator==(const Passage&) const = default;
};

Passage passage(const hw::Topology& topology, int from, int to) {
  Passage p{{from}, {}};
  for (const hw::RouteHop& hop : topology.route(from, to)) {
    const hw::NetworkLink& link = topology.links()[static_cast<std::size_t>(hop.link)];
    REQUIRE((hop.forward ? link.a : link.b) == p.vertices.back());
    p.vertices.push_back(hop.forward ? link.b : link.a);
    p.links.emplace_back(link.bytes_per_second, link.latency_s);
  }
  return p;
}

// Every pair of GPUs takes the same route through the same links in both.
void check_same_routes(const hw::Topology& a, const hw::Topology& b) {
  REQUIRE(a.num_gpus() == b.num_gpus());
  for (int from = 0; from < a.num_gpus(); ++from)
    for (int to = 0; to < a.num_gpus(); ++to) {
      CAPTURE(from, to);
      CHECK(passage(a, from, to) == passage(b, from, to));
    }
}

// The built-in tree of `built_in`'s first `nodes` nodes, checked against `graph` (the same tree written
// as a network file): the same GPUs, links and routes.
hw::RailFatTree checked_against_graph(const hw::ClusterSpec& built_in, int nodes,
                                      const json_input::Json& graph) {
  testing::TempDir dir;
  const hw::ClusterSpec from_file =
      hw::load_cluster(dir.write("tree.json", testing::a100_with_network(graph)));
  hw::RailFatTree tree(built_in, nodes);
  REQUIRE(tree.num_gpus() == from_file.network->num_gpus());
  REQUIRE(tree.links().size() == from_file.network->links().size());
  check_same_routes(tree, *from_file.network);
  return tree;
}

}  // namespace

TEST_CASE("rail fat tree: the built-in network routes as the same tree written as a graph", "[hw_models]") {
  const double oversubscription = GENERATE(1.0, 2.0);
  const int nodes = GENERATE(2, 3);
  CAPTURE(oversubscription, nodes);
  hw::ClusterSpec built_in = hw::load_cluster("dgx-a100", nodes);
  built_in.spine_oversubscription = oversubscription;
  checked_against_graph(built_in, nodes, testing::rail_fat_tree(built_in, nodes, oversubscription));
}

TEST_CASE("rail fat tree: in pods, the built-in network routes as the three-level tree written as a graph",
          "[hw_models]") {
  // Pods of 2 nodes; a job of 3 or 4 nodes of a cluster of 8 reaches 2 pods through the core.
  const double oversubscription = GENERATE(1.0, 2.0);
  const int nodes = GENERATE(3, 4);
  CAPTURE(oversubscription, nodes);
  hw::ClusterSpec built_in = hw::load_cluster("dgx-a100", 8);
  built_in.pod_nodes = 2;
  built_in.spine_oversubscription = oversubscription;
  const hw::RailFatTree tree =
      checked_against_graph(built_in, nodes, testing::pod_fat_tree(built_in, nodes, oversubscription));
  // Rail 0 of node 0 to rail 0 of node 1: one leaf; to rail 1 of node 1: the pod's spine; to node 2,
  // another pod: up to the core and down, six links.
  CHECK(tree.route(0, 8).size() == 2);
  CHECK(tree.route(0, 9).size() == 4);
  CHECK(tree.route(0, 16).size() == 6);
}

TEST_CASE("rail fat tree: pods of at least the cluster's nodes are the two-level tree", "[hw_models]") {
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 4);
  const hw::RailFatTree two_levels(cluster, 4);
  cluster.pod_nodes = 4;
  const hw::RailFatTree one_pod(cluster, 4);
  REQUIRE(one_pod.links().size() == two_levels.links().size());
  check_same_routes(one_pod, two_levels);
}

TEST_CASE("rail fat tree: GPUs share their node's NICs in turn where it has fewer", "[hw_models]") {
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 2);
  cluster.nics_per_node = 4;
  const hw::RailFatTree tree(cluster, 2);
  // 16 NVLink links, 2 × 4 NICs, 4 spine uplinks.
  CHECK(tree.links().size() == 16 + 8 + 4);
  // GPUs 1 and 5 of node 0 are both on rail 1: the same NIC, and to node 1's rail-1 GPUs no spine.
  CHECK(tree.route(1, 9).front() == tree.route(5, 13).front());
  CHECK(tree.route(1, 13).size() == 2);
  CHECK(tree.route(1, 10).size() == 4);  // rail 1 to rail 2: up the spine
  // The uplinks carry the cluster's nodes' NICs of their rail, whatever the nodes built.
  cluster.num_nodes = 8;
  CHECK(hw::RailFatTree(cluster, 2).links().back().bytes_per_second ==
        Approx(8 * cluster.inter_node.bytes_per_second));
}

TEST_CASE("rail fat tree: a cluster's topology is its file's graph where it has one", "[hw_models]") {
  const hw::ClusterSpec superpod = hw::load_cluster("dgx-h100-superpod");
  CHECK(hw::cluster_topology(superpod, 1).get() == superpod.network.get());
  const hw::ClusterSpec a100 = hw::load_cluster("dgx-a100", 4);
  CHECK(hw::cluster_topology(a100, 2)->num_gpus() == 16);
  CHECK(hw::cluster_topology(a100, 1)->links().size() == 8);  // one node: NVLink only
}
