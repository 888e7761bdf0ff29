// evaluation/sweep_spec.cpp: the topology axes change the cluster each point runs on.
#include "evaluation/sweep_spec.hpp"

#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "tests/hw_models/network_files.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;
using Catch::Matchers::Contains;

TEST_CASE("sweep spec: oversubscription and nvlink_domain axes give each point its cluster", "[evaluation]") {
  testing::TempDir dir;
  const evaluation::SweepSpec spec = evaluation::load_sweep_spec(dir.write(
      "topology.json",
      R"({"base": {"engine": "sim", "nodes": 2}, "axes": {"oversubscription": [1, 2], "nvlink_domain": [8, 16]}})"));
  REQUIRE(spec.points.size() == 4);
  const evaluation::CompareJob plain = spec.job(spec.points[0]);  // oversubscription 1, domain 8
  REQUIRE(plain.cluster);
  CHECK(plain.cluster->spine_oversubscription == 1);
  CHECK(plain.cluster->gpus_per_node == 8);
  const evaluation::CompareJob wide = spec.job(spec.points[3]);  // oversubscription 2, domain 16
  REQUIRE(wide.cluster);
  CHECK(wide.cluster->spine_oversubscription == 2);
  CHECK(wide.cluster->gpus_per_node == 16);
  CHECK(wide.cluster->nics_per_node == 16);  // one NIC per GPU, as the preset has
  CHECK(wide.cluster->num_gpus() == 32);
  CHECK(wide.cluster->gpu.hbm_bytes == hw::load_cluster("dgx-a100").gpu.hbm_bytes);
}

TEST_CASE("sweep spec: an oversubscribed spine is at least 1, on a cluster without a network graph",
          "[evaluation]") {
  testing::TempDir dir;
  const auto error = [&](const std::string& text) {
    try {
      evaluation::load_sweep_spec(dir.write("bad.json", text));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    FAIL("no error for " + text);
    return std::string();
  };
  CHECK_THAT(error(R"({"axes": {"oversubscription": [0.5]}})"),
             Contains("oversubscription") && Contains("at least 1"));
  const std::string graph = dir.write(
      "graph.json", testing::a100_with_network(testing::rail_fat_tree(hw::load_cluster("dgx-a100"), 2, 1)));
  CHECK_THAT(error(R"({"base": {"cluster": ")" + graph + R"("}, "axes": {"oversubscription": [2]}})"),
             Contains("oversubscription") && Contains("network graph"));
}
