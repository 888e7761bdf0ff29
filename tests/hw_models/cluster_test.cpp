// hw_models/cluster.cpp: the presets carry their sources' figures (datasheets, nccl-tests, the
// FlashAttention charts), curves read in log(x), multi-node variants, and every kind of bad cluster input
// fails with an InputError naming the field.
#include "hw_models/cluster.hpp"

#include "common/limits.hpp"
#include "tests/hw_models/network_files.hpp"
#include "tests/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>

#include "common/errors.hpp"
#include "common/json_input.hpp"
#include "common/units.hpp"

using paradyse::testing::TempDir;

namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using paradyse::InputError;
using paradyse::InternalError;
using paradyse::kGiB;
using paradyse::kMiB;
using paradyse::hw::ClusterSpec;
using paradyse::hw::Curve;
using paradyse::hw::load_cluster;

// The dgx-a100 preset, edited, written as a file: the way a user starts a custom cluster.
std::string write_edited_a100(const TempDir& dir, const std::string& name,
                              const std::function<void(paradyse::json_input::Json&)>& edit) {
  auto json = paradyse::json_input::parse(paradyse::hw::cluster_preset_text("dgx-a100"), "test");
  edit(json);
  return dir.write(name, json.dump(2));
}

// The edit that gives the cluster a host block of its own in place of its preset's framework.
std::function<void(paradyse::json_input::Json&)> own_host(const paradyse::json_input::Json& host) {
  return [host](paradyse::json_input::Json& json) {
    json.erase("framework");
    json["host"] = host;
  };
}

// Loading must throw an InputError; returns it for the caller to inspect.
InputError load_error(const std::string& name_or_path, int num_nodes = 1) {
  REQUIRE_THROWS_AS(load_cluster(name_or_path, num_nodes), InputError);
  std::optional<InputError> caught;
  try {
    load_cluster(name_or_path, num_nodes);
  } catch (const InputError& e) {
    caught = e;
  }
  REQUIRE(caught.has_value());
  return *caught;
}

}  // namespace

TEST_CASE(
    "cluster presets: names are sorted, DGX nodes of 8 GPUs (a SuperPOD unit of 32), an NVL72 rack of 72",
    "[hw_models]") {
  const std::vector<std::string> expected = {
      "dgx-a100", "dgx-h100", "dgx-h100-superpod", "dgx-h100-superpod-16k", "dgx-h200", "gb200-nvl72"};
  REQUIRE(paradyse::hw::cluster_preset_names() == expected);
  for (const std::string& name : expected) {
    ClusterSpec cluster = load_cluster(name);
    const int gpus = name == "gb200-nvl72" ? 72 : 8;
    const int nodes = name == "dgx-h100-superpod" ? 32 : 1;  // one scalable unit, its network a graph
    CHECK(cluster.name == name);
    CHECK(cluster.source == "preset " + name);
    CHECK(cluster.num_nodes == nodes);
    CHECK(cluster.gpus_per_node == gpus);
    CHECK(cluster.nics_per_node == gpus);
    CHECK(cluster.num_gpus() == nodes * gpus);
    CHECK_FALSE(cluster.description.empty());
    CHECK(cluster.tensor_capacity_bytes() == cluster.gpu.hbm_bytes - cluster.gpu.reserved_bytes);
    CHECK(cluster.tensor_capacity_bytes() > 0.9 * cluster.gpu.hbm_bytes);
  }
}

TEST_CASE("cluster presets: dgx-a100 carries the A100 figures of its datasheet and published benchmarks",
          "[hw_models]") {
  ClusterSpec a100 = load_cluster("dgx-a100");
  CHECK(a100.gpu.bf16_flops_per_second == 312e12);
  CHECK(a100.gpu.hbm_bytes == 80 * kGiB);  // the datasheet's 80 GB are GiB (nvidia-smi: 81920 MiB)
  CHECK(a100.gpu.hbm_bytes_per_second == 1.61e12);
  // GEMMs by tiles on the A100's 108 SMs, at MAMF's 85.9% of the peak in their main loops.
  REQUIRE(a100.gpu.gemm_tiles);
  CHECK(a100.gpu.gemm_tiles->streaming_multiprocessors == 108);
  CHECK(a100.gpu.gemm_tiles->peak_efficiency == Approx(267.9 / 312).epsilon(1e-3));
  // FlashAttention-2 fwd+bwd: 4K tokens 196 TFLOP/s, causal 16K 189.
  CHECK(a100.gpu.attention.efficiency_by_seq.at(4096) == Approx(196.0 / 312).epsilon(1e-4));
  CHECK(a100.gpu.attention.causal_efficiency_by_seq.at(16384) == Approx(189.0 / 312).epsilon(1e-4));
  CHECK(a100.intra_node.bytes_per_second == 300e9);
  CHECK(a100.intra_node.bus_bandwidth_by_bytes.at(1 * kMiB) == 36.2e9);
  CHECK(a100.intra_node.bus_bandwidth_by_bytes.at(64 * kMiB) == 166.6e9);
  CHECK(a100.intra_node.bus_bandwidth_by_bytes.at(1 * kGiB) == 228.1e9);
  CHECK(a100.intra_node.bus_bandwidth_by_bytes.at(8 * kGiB) == 231.6e9);
  // FlexSP: a Ulysses all-to-all within 8 A100s at 96–120 GB/s.
  double all_to_all = a100.intra_node.all_to_all_efficiency * 231.6e9;
  CHECK(all_to_all >= 96e9);
  CHECK(all_to_all <= 120e9);
  CHECK(a100.inter_node.bytes_per_second == 23.5e9);  // HDR 200 Gb/s, effective
}

TEST_CASE("cluster presets: dgx-h100 and dgx-h200 carry the Hopper datasheets' and NCCL's figures",
          "[hw_models]") {
  ClusterSpec h100 = load_cluster("dgx-h100");
  ClusterSpec h200 = load_cluster("dgx-h200");
  CHECK(h100.gpu.bf16_flops_per_second == 989e12);
  CHECK(h200.gpu.bf16_flops_per_second == 989e12);
  CHECK(h100.gpu.hbm_bytes == 80 * kGiB);
  CHECK(h200.gpu.hbm_bytes == 141 * kGiB);  // nvidia-smi: 143771 MiB usable of it
  // Their GPU and host figures are measured on one of each (tests/costmodel/measured_gpus_test.cpp).
  CHECK(h100.intra_node.bytes_per_second == 450e9);
  CHECK(h200.intra_node.bytes_per_second == 450e9);
  CHECK(h100.intra_node.bus_bandwidth_by_bytes.at(16 * kMiB) == 234.5e9);
  CHECK(h100.intra_node.bus_bandwidth_by_bytes.at(8 * kGiB) == 478.9e9);
  CHECK(h200.intra_node.bus_bandwidth_by_bytes.at(256 * kMiB) == 432.2e9);
  CHECK(h200.intra_node.bus_bandwidth_by_bytes.at(8 * kGiB) == 480.0e9);
  CHECK(h100.inter_node.bytes_per_second == 47e9);  // NDR 400 Gb/s, effective
  CHECK(h200.inter_node.bytes_per_second == 47e9);
}

TEST_CASE("cluster presets: gb200-nvl72 carries the GB200 NVL72 datasheet's figures per GPU", "[hw_models]") {
  ClusterSpec nvl72 = load_cluster("gb200-nvl72");
  // Per rack: 360 PFLOPS BF16 with 2:4 sparsity, 13.4 TB HBM3e at 576 TB/s, 130 TB/s of NVLink.
  CHECK(72 * nvl72.gpu.bf16_flops_per_second == Approx(360e15 / 2));
  CHECK(72 * nvl72.gpu.hbm_bytes == Approx(13.4e12).epsilon(0.001));
  CHECK(nvl72.gpu.hbm_bytes_per_second < 576e12 / 72);  // a copy's rate, below the datasheet's
  CHECK(72 * 2 * nvl72.intra_node.bytes_per_second == Approx(130e12).epsilon(0.01));
  // One NVLink domain: a collective over all 72 GPUs stays on NVLink.
  CHECK(&nvl72.fabric_of(0, 72, 1) == &nvl72.intra_node);
}

TEST_CASE("cluster presets: the derived multi-node figures agree with the NIC figures", "[hw_models]") {
  for (const std::string& name : paradyse::hw::cluster_preset_names()) {
    ClusterSpec cluster = load_cluster(name);
    INFO(name);
    const double nic = cluster.inter_node.bytes_per_second;
    const double ring = cluster.inter_node.bus_bandwidth_by_bytes.at(8 * kGiB);
    // A ring across nodes uses one channel per NIC: no more than all NICs together, nor NVLink's.
    CHECK(ring <= cluster.nics_per_node * nic);
    CHECK(ring <= cluster.intra_node.bus_bandwidth_by_bytes.at(8 * kGiB));
    CHECK(ring >= 0.95 * std::min(cluster.nics_per_node * nic, 370e9));
    // All-to-all across nodes at about one NIC's bandwidth (nccl-tests #267).
    CHECK(cluster.inter_node.all_to_all_efficiency * ring == Approx(nic).epsilon(1e-3));
    for (const Curve* curve :
         {&cluster.gpu.attention.efficiency_by_seq, &cluster.gpu.attention.causal_efficiency_by_seq})
      for (const auto& [x, y] : curve->points()) CHECK(y <= 1);
    REQUIRE(cluster.gpu.gemm_tiles);
    CHECK(cluster.gpu.gemm_tiles->peak_efficiency <= 1);
  }
}

TEST_CASE("Curve: linear in log(x) between points, clamped at both ends", "[hw_models]") {
  Curve two({{1, 10}, {100, 30}});
  CHECK(two.at(1) == 10);
  CHECK(two.at(100) == 30);
  CHECK(two.at(10) == Approx(20));  // log-midpoint of 1 and 100
  CHECK(two.at(1000) == 30);
  CHECK(two.at(0.5) == 10);
  CHECK(two.at(0) == 10);
  CHECK(two.at(-3) == 10);

  Curve three({{1, 1}, {10, 2}, {1000, 5}});
  CHECK(three.at(std::sqrt(10.0)) == Approx(1.5));
  CHECK(three.at(100) == Approx(3.5));  // half way from 10 to 1000 in log: 2 + 0.5·3
  CHECK(three.at(10) == Approx(2));

  Curve single({{4, 7}});
  CHECK(single.at(1) == 7);
  CHECK(single.at(100) == 7);

  // A preset's busbw at 2 MiB, half way in log from 1 MiB (36.2 GB/s) to 4 MiB (71.4 GB/s).
  CHECK(load_cluster("dgx-a100").intra_node.bus_bandwidth_by_bytes.at(2 * kMiB) ==
        Approx((36.2e9 + 71.4e9) / 2));
}

TEST_CASE("Curve: broken invariants are internal errors", "[hw_models]") {
  CHECK_THROWS_AS(Curve().at(1), InternalError);
  CHECK_THROWS_AS(Curve(std::vector<std::pair<double, double>>{}), InternalError);
  CHECK_THROWS_AS(Curve({{10, 1}, {1, 2}}), InternalError);
  CHECK_THROWS_AS(Curve({{1, 1}, {1, 2}}), InternalError);
  CHECK_THROWS_AS(Curve({{0, 1}, {1, 2}}), InternalError);
  CHECK_THROWS_AS(Curve({{1, 0}}), InternalError);
  CHECK_THROWS_AS(Curve({{1, 1}}).at(std::nan("")), InternalError);
}

TEST_CASE("load_cluster: multi-node variants replicate the node", "[hw_models]") {
  ClusterSpec one = load_cluster("dgx-h100", 1);
  ClusterSpec four = load_cluster("dgx-h100", 4);
  CHECK(one.name == "dgx-h100");
  CHECK(four.name == "dgx-h100 x4");
  CHECK(four.num_nodes == 4);
  CHECK(four.gpus_per_node == 8);
  CHECK(four.num_gpus() == 32);
  CHECK(load_cluster("dgx-a100", 2).num_gpus() == 16);
  CHECK(four.gpu.bf16_flops_per_second == one.gpu.bf16_flops_per_second);
  CHECK(four.tensor_capacity_bytes() == one.tensor_capacity_bytes());
  CHECK(four.inter_node.bytes_per_second == one.inter_node.bytes_per_second);
}

TEST_CASE("load_cluster: a JSON file of the preset schema loads from its path", "[hw_models]") {
  TempDir dir;
  std::string path = write_edited_a100(dir, "my-cluster.json", [](auto& json) {
    json["name"] = "my-cluster";
    json["gpus_per_node"] = 4;
    json["gpu"]["bf16_flops_per_second"] = 100e12;
  });
  ClusterSpec cluster = load_cluster(path, 3);
  CHECK(cluster.name == "my-cluster x3");
  CHECK(cluster.source == path);
  CHECK(cluster.num_gpus() == 12);
  CHECK(cluster.gpu.bf16_flops_per_second == 100e12);
  CHECK(cluster.gpu.hbm_bytes == 80 * kGiB);
}

TEST_CASE("load_cluster: bad input is an InputError naming the file and field", "[hw_models]") {
  TempDir dir;

  SECTION("unknown preset name: the message lists the presets") {
    InputError e = load_error("dgx-a1000");
    CHECK(e.field() == "cluster");
    CHECK_THAT(e.what(), Contains("dgx-a1000") && Contains("dgx-a100,") && Contains("dgx-h100") &&
                             Contains("dgx-h200"));
    CHECK_THROWS_AS(paradyse::hw::cluster_preset_text("dgx-a1000"), InputError);
  }
  SECTION("a path that does not exist") {
    std::string missing = (fs::temp_directory_path() / "paradyse-no-such-cluster.json").string();
    InputError e = load_error(missing);
    CHECK_THAT(e.what(), Contains(missing) && Contains("dgx-h200"));
  }
  SECTION("num_nodes below 1") {
    CHECK(load_error("dgx-a100", 0).field() == "nodes");
    CHECK_THAT(load_error("dgx-a100", -2).what(), Contains("nodes") && Contains("-2"));
  }
  SECTION("a missing field") {
    std::string path =
        write_edited_a100(dir, "missing.json", [](auto& json) { json["gpu"].erase("hbm_bytes"); });
    InputError e = load_error(path);
    CHECK(e.file() == path);
    CHECK_THAT(e.what(), Contains(path) && Contains("gpu.hbm_bytes"));
  }
  SECTION("a misspelt field") {
    std::string path = write_edited_a100(dir, "misspelt.json", [](auto& json) {
      auto& fabric = json["intra_node"];
      fabric["latency_second"] = fabric["latency_seconds"];
      fabric.erase("latency_seconds");
    });
    InputError e = load_error(path);
    CHECK(e.file() == path);
    CHECK_THAT(e.what(), Contains("latency_second"));
  }
  SECTION("an unknown top-level field") {
    std::string path = write_edited_a100(dir, "unknown.json", [](auto& json) { json["gpu_count"] = 8; });
    CHECK_THAT(load_error(path).what(), Contains("gpu_count"));
  }
  SECTION("a figure without a source") {
    std::string path = write_edited_a100(dir, "unsourced.json",
                                         [](auto& json) { json["gpu"]["source"].erase("hbm_bytes"); });
    CHECK_THAT(load_error(path).what(), Contains("gpu.source.hbm_bytes"));
  }
  SECTION("a source for a figure that does not exist") {
    std::string path = write_edited_a100(dir, "extra-source.json", [](auto& json) {
      json["inter_node"]["source"]["jitter_seconds"] = "assumed";
    });
    CHECK_THAT(load_error(path).what(), Contains("jitter_seconds"));
  }
  SECTION("pods: a count with a source, and none beside a network graph") {
    const std::string zero = write_edited_a100(dir, "pods-zero.json", [](auto& json) {
      json["pod_nodes"] = 0;
      json["source"]["pod_nodes"] = "test";
    });
    CHECK_THAT(load_error(zero).what(), Contains(zero) && Contains("pod_nodes"));
    const std::string unsourced =
        write_edited_a100(dir, "pods-unsourced.json", [](auto& json) { json["pod_nodes"] = 4; });
    CHECK_THAT(load_error(unsourced).what(), Contains("source.pod_nodes"));
    const std::string with_graph = write_edited_a100(dir, "pods-graph.json", [](auto& json) {
      json["pod_nodes"] = 4;
      json["source"]["pod_nodes"] = "test";
      json["network"] = paradyse::testing::rail_fat_tree(load_cluster("dgx-a100", 2), 2, 1.0);
    });
    CHECK_THAT(load_error(with_graph).what(), Contains("pod_nodes") && Contains("network graph"));
    const std::string good = write_edited_a100(dir, "pods.json", [](auto& json) {
      json["pod_nodes"] = 4;
      json["source"]["pod_nodes"] = "test";
    });
    CHECK(load_cluster(good, 8).pod_nodes == 4);
  }
  SECTION("a negative bandwidth") {
    std::string path = write_edited_a100(
        dir, "negative.json", [](auto& json) { json["inter_node"]["bytes_per_second"] = -23.5e9; });
    InputError e = load_error(path);
    CHECK(e.file() == path);
    CHECK_THAT(e.what(), Contains("inter_node.bytes_per_second"));
  }
  SECTION("a negative latency") {
    std::string path = write_edited_a100(dir, "latency.json",
                                         [](auto& json) { json["intra_node"]["latency_seconds"] = -1e-5; });
    CHECK_THAT(load_error(path).what(), Contains("intra_node.latency_seconds"));
  }
  SECTION("figures outside any machine's range") {
    const std::vector<std::pair<std::function<void(paradyse::json_input::Json&)>, std::string>> cases = {
        {[](auto& json) { json["gpu"]["bf16_flops_per_second"] = 1e-300; }, "gpu.bf16_flops_per_second"},
        {[](auto& json) { json["gpu"]["hbm_bytes"] = 1e30; }, "gpu.hbm_bytes"},
        {[](auto& json) { json["inter_node"]["bytes_per_second"] = 25; }, "inter_node.bytes_per_second"},
        {[](auto& json) { json["intra_node"]["latency_seconds"] = 20; }, "intra_node.latency_seconds"},
        {[](auto& json) { json["intra_node"]["bus_bandwidth_by_bytes"][0][1] = 1e-300; },
         "intra_node.bus_bandwidth_by_bytes"},
        {[](auto& json) { json["gpu"]["attention_efficiency_by_seq"][0][1] = 1e-9; },
         "gpu.attention_efficiency_by_seq"}};
    for (const auto& [edit, field] : cases) {
      INFO(field);
      const InputError e = load_error(write_edited_a100(dir, "range.json", edit));
      CHECK(e.field() == field);
      CHECK_THAT(e.message(), Contains("expected"));
    }
  }
  SECTION("a non-monotone curve") {
    std::string path = write_edited_a100(dir, "non-monotone.json", [](auto& json) {
      auto& curve = json["intra_node"]["bus_bandwidth_by_bytes"];
      std::swap(curve[2], curve[3]);
    });
    CHECK_THAT(load_error(path).what(), Contains("intra_node.bus_bandwidth_by_bytes"));
  }
  SECTION("an efficiency above 1") {
    std::string path = write_edited_a100(
        dir, "efficiency.json", [](auto& json) { json["gpu"]["attention_efficiency_by_seq"][3][1] = 1.2; });
    CHECK_THAT(load_error(path).what(), Contains("gpu.attention_efficiency_by_seq"));
  }
  SECTION("both GEMM models, or neither") {
    std::string both = write_edited_a100(dir, "both.json", [](auto& json) {
      json["gpu"]["gemm_efficiency_by_flops"] = {{1e9, 0.5}};
      json["gpu"]["source"]["gemm_efficiency_by_flops"] = "a test";
    });
    CHECK_THAT(load_error(both).what(), Contains("gpu.gemm_tiles") && Contains("exactly one"));
    std::string neither =
        write_edited_a100(dir, "neither.json", [](auto& json) { json["gpu"].erase("gemm_tiles"); });
    CHECK_THAT(load_error(neither).what(), Contains("gpu.gemm_tiles") && Contains("exactly one"));
  }
  SECTION("a GEMM figure without its source") {
    std::string path = write_edited_a100(
        dir, "tiles.json", [](auto& json) { json["gpu"]["gemm_tiles"]["source"].erase("setup_k"); });
    CHECK_THAT(load_error(path).what(), Contains("gpu.gemm_tiles.source"));
  }
  SECTION("a curve at x = 0, which log(x) cannot read") {
    std::string path = write_edited_a100(
        dir, "zero-x.json", [](auto& json) { json["gpu"]["attention_efficiency_by_seq"][0][0] = 0; });
    CHECK_THAT(load_error(path).what(), Contains("gpu.attention_efficiency_by_seq"));
  }
  SECTION("reserved memory as large as the HBM") {
    std::string path = write_edited_a100(
        dir, "reserved.json", [](auto& json) { json["gpu"]["reserved_bytes"] = json["gpu"]["hbm_bytes"]; });
    CHECK_THAT(load_error(path).what(), Contains("gpu.reserved_bytes"));
  }
  SECTION("an all-to-all efficiency of 0") {
    std::string path = write_edited_a100(dir, "all-to-all.json",
                                         [](auto& json) { json["inter_node"]["all_to_all_efficiency"] = 0; });
    CHECK_THAT(load_error(path).what(), Contains("inter_node.all_to_all_efficiency"));
  }
  SECTION("a fractional GPU count") {
    std::string path =
        write_edited_a100(dir, "fractional.json", [](auto& json) { json["gpus_per_node"] = 7.5; });
    CHECK_THAT(load_error(path).what(), Contains("gpus_per_node"));
  }
  SECTION("malformed JSON: the error names the file and the line") {
    std::string path = dir.write("malformed.json", "{\n  \"name\": \"broken\",\n  \"gpus_per_node\" 8\n}\n");
    InputError e = load_error(path);
    CHECK(e.file() == path);
    CHECK(e.line() == 3);
    CHECK_THAT(e.what(), Contains(path + ":3"));
  }
  SECTION("not a JSON object") {
    std::string path = dir.write("array.json", "[1, 2]\n");
    InputError e = load_error(path);
    CHECK(e.file() == path);
  }
}

TEST_CASE("load_cluster: measured kernel rates are read, each with one curve and its source", "[hw_models]") {
  TempDir dir;
  auto with_kernels = [&](const std::string& name, const paradyse::json_input::Json& kernels) {
    return write_edited_a100(dir, name, [&](auto& json) { json["gpu"]["kernels"] = kernels; });
  };
  const std::string good =
      with_kernels("good.json", {{"softmax",
                                  {{"bytes_per_second_by_bytes", {{1e6, 1e9}, {4e6, 2e9}}},
                                   {"source", {{"bytes_per_second_by_bytes", "measured"}}}}},
                                 {"scores",
                                  {{"flops_per_second_by_flops", {{1e9, 1e11}}},
                                   {"source", {{"flops_per_second_by_flops", "measured"}}}}}});
  const ClusterSpec cluster = load_cluster(good);
  REQUIRE(cluster.gpu.kernel_rates.size() == 2);
  const paradyse::hw::KernelRate& softmax = cluster.gpu.kernel_rates.at("softmax");
  CHECK_FALSE(softmax.by_flops);
  CHECK(cluster.gpu.kernel_rates.at("scores").by_flops);
  // size / rate(size) between and beyond the points; below the smallest size, the smallest's time.
  CHECK(softmax.seconds(4e6) == Approx(4e6 / 2e9));
  CHECK(softmax.seconds(2e6) == Approx(2e6 / 1.5e9));
  CHECK(softmax.seconds(8e6) == Approx(8e6 / 2e9));
  CHECK(softmax.seconds(1e3) == Approx(1e6 / 1e9));
  CHECK(load_cluster("dgx-a100").gpu.kernel_rates.empty());  // GPUs: the roofline

  SECTION("both curves") {
    const std::string path =
        with_kernels("both.json", {{"softmax",
                                    {{"bytes_per_second_by_bytes", {{1e6, 1e9}}},
                                     {"flops_per_second_by_flops", {{1e6, 1e9}}},
                                     {"source", {{"bytes_per_second_by_bytes", "measured"}}}}}});
    CHECK_THAT(load_error(path).what(), Contains("gpu.kernels.softmax") && Contains("exactly one"));
  }
  SECTION("a curve without its source") {
    const std::string path = with_kernels(
        "unsourced.json",
        {{"softmax",
          {{"bytes_per_second_by_bytes", {{1e6, 1e9}}}, {"source", paradyse::json_input::Json::object()}}}});
    CHECK_THAT(load_error(path).what(), Contains("gpu.kernels.softmax.source.bytes_per_second_by_bytes"));
  }
  SECTION("a rate that is not positive") {
    const std::string path =
        with_kernels("zero.json", {{"gelu",
                                    {{"bytes_per_second_by_bytes", {{1e6, 0}}},
                                     {"source", {{"bytes_per_second_by_bytes", "measured"}}}}}});
    CHECK_THAT(load_error(path).what(), Contains("gpu.kernels.gelu.bytes_per_second_by_bytes"));
  }
}

TEST_CASE("load_cluster: the optional attention dropout factor, by key length, with its source",
          "[hw_models]") {
  TempDir dir;
  const std::string path = write_edited_a100(dir, "dropout.json", [](auto& json) {
    json["gpu"]["attention_dropout_time_factor_by_seq"] = {{512, 1.1}, {4096, 1.2}};
    json["gpu"]["source"]["attention_dropout_time_factor_by_seq"] = "measured";
  });
  CHECK(load_cluster(path).gpu.attention_dropout_time_factor_by_seq.at(4096) == 1.2);
  CHECK(load_cluster("dgx-a100").gpu.attention_dropout_time_factor_by_seq.points().empty());
  const std::string unsourced = write_edited_a100(dir, "unsourced-dropout.json", [](auto& json) {
    json["gpu"]["attention_dropout_time_factor_by_seq"] = {{512, 1.1}};
  });
  CHECK_THAT(load_error(unsourced).what(), Contains("gpu.source.attention_dropout_time_factor_by_seq"));
}

TEST_CASE(
    "load_cluster: an efficiency curve takes points down to the lowest efficiency, and refuses below it",
    "[hw_models]") {
  // calibrate writes a point timed while the machine stalled at kLowestEfficiency: the file must load.
  TempDir dir;
  const auto with_gemm_point = [&](const std::string& name, double efficiency) {
    return write_edited_a100(dir, name, [&](auto& json) {
      json["gpu"].erase("gemm_tiles");
      json["gpu"]["gemm_efficiency_by_flops"] = {{524288, efficiency}, {268435456, 0.9}};
      json["gpu"]["source"]["gemm_efficiency_by_flops"] = "measured";
    });
  };
  CHECK(load_cluster(with_gemm_point("floor.json", paradyse::kLowestEfficiency))
            .gpu.gemm_efficiency_by_flops.at(524288) == paradyse::kLowestEfficiency);
  CHECK_THAT(load_error(with_gemm_point("below.json", paradyse::kLowestEfficiency / 2)).what(),
             Contains("gpu.gemm_efficiency_by_flops") && Contains("0.001"));
}

TEST_CASE(
    "load_cluster: attention's forward measured apart, both masks or neither, sourced, leaving the backward "
    "a time within the peak",
    "[hw_models]") {
  TempDir dir;
  // Where it is measured, the forward runs at its own rate and the backward takes the rest of the pair's
  // time, at every length (3000 tokens: between the measured ones).
  const ClusterSpec h100 = load_cluster("dgx-h100");
  const paradyse::hw::GpuSpec::AttentionCurves& curves = h100.gpu.attention;
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    CHECK(curves.efficiency(causal, true, 2048) ==
          (causal ? curves.causal_forward_efficiency_by_seq : curves.forward_efficiency_by_seq).at(2048));
    CHECK(curves.efficiency(causal, true, 2048) > curves.efficiency(causal, false, 2048));
    const double pair_s =
        3.5 / (causal ? curves.causal_efficiency_by_seq : curves.efficiency_by_seq).at(3000);
    CHECK(1 / curves.efficiency(causal, true, 3000) + 2.5 / curves.efficiency(causal, false, 3000) ==
          Approx(pair_s).epsilon(1e-12));
  }
  // Without it (the A100's charts time the pair only) both directions run at the pair's rate.
  const ClusterSpec a100 = load_cluster("dgx-a100");
  CHECK(a100.gpu.attention.efficiency(true, true, 2048) == a100.gpu.attention.efficiency(true, false, 2048));

  const auto with_forward = [&](const std::string& name, double causal_forward_at_512, bool both,
                                bool sourced) {
    return write_edited_a100(dir, name, [&](auto& json) {
      auto& gpu = json["gpu"];
      gpu["attention_forward_efficiency_by_seq"] = {{512, 0.6}, {16384, 0.7}};
      if (both)
        gpu["causal_attention_forward_efficiency_by_seq"] = {{512, causal_forward_at_512}, {16384, 0.7}};
      gpu["source"]["attention_forward_efficiency_by_seq"] = "measured";
      if (sourced) gpu["source"]["causal_attention_forward_efficiency_by_seq"] = "measured";
    });
  };
  CHECK(load_cluster(with_forward("forward.json", 0.4, true, true))
            .gpu.attention.causal_forward_efficiency_by_seq.at(512) == 0.4);
  CHECK_THAT(load_error(with_forward("one.json", 0.4, false, true)).what(),
             Contains("gpu.causal_attention_forward_efficiency_by_seq") && Contains("together"));
  CHECK_THAT(load_error(with_forward("unsourced.json", 0.4, true, false)).what(),
             Contains("gpu.source.causal_attention_forward_efficiency_by_seq"));
  // The A100's causal pair at 512 tokens is 99 of 312 TFLOP/s: a forward at 0.11 of peak would leave
  // the backward above the peak, one at 0.09 no time at all.
  for (const double forward : {0.11, 0.09}) {
    CAPTURE(forward);
    const std::string error = load_error(with_forward("slow.json", forward, true, true)).what();
    CHECK_THAT(error, Contains("gpu.causal_attention_forward_efficiency_by_seq") &&
                          Contains("at 512 tokens") && Contains(forward == 0.11 ? "of peak" : "no time"));
  }
}

TEST_CASE("load_cluster: other attention implementations, each with both curves and their sources, by name",
          "[hw_models]") {
  TempDir dir;
  ClusterSpec a100 = load_cluster("dgx-a100");
  REQUIRE(a100.gpu.attention_implementations.contains("flash-attention-triton"));
  // Its Triton kernel at 16K tokens, causal, on the chart that gives the GPU's own curves: 80 of 312 TFLOP/s.
  CHECK(a100.gpu.attention_implementations.at("flash-attention-triton").causal_efficiency_by_seq.at(16384) ==
        Approx(80.0 / 312).epsilon(1e-4));
  for (const char* h100 : {"dgx-h100", "dgx-h100-superpod", "dgx-h100-superpod-16k"})
    CHECK(load_cluster(h100).gpu.attention_implementations.contains("flash-attention-triton"));
  CHECK(load_cluster("dgx-h200").gpu.attention_implementations.empty());
  CHECK(a100.attention_implementation.empty());
  CHECK(&a100.attention_curves() == &a100.gpu.attention);
  use_attention_implementation(a100, "flash-attention-triton", "--attention-implementation");
  CHECK(&a100.attention_curves() == &a100.gpu.attention_implementations.at("flash-attention-triton"));

  try {
    use_attention_implementation(a100, "flash-attention-3", "--attention-implementation");
    FAIL("an implementation the GPU has no figures for was taken");
  } catch (const InputError& e) {
    CHECK(e.field() == "--attention-implementation");
    CHECK_THAT(e.message(), Contains("A100-SXM4-80GB") && Contains("flash-attention-triton") &&
                                Contains("got 'flash-attention-3'"));
  }
  CHECK(a100.attention_implementation == "flash-attention-triton");  // unchanged by the refusal
  ClusterSpec h200 = load_cluster("dgx-h200");
  CHECK_THROWS_WITH(use_attention_implementation(h200, "flash-attention-triton", "x"),
                    Contains("it has none besides its own curves"));

  const auto with_implementation = [&](const std::string& name, bool causal, bool sourced) {
    return write_edited_a100(dir, name, [&](auto& json) {
      auto& curves = json["gpu"]["attention_implementations"]["mine"];
      curves["attention_efficiency_by_seq"] = {{512, 0.2}, {16384, 0.3}};
      if (causal) curves["causal_attention_efficiency_by_seq"] = {{512, 0.1}, {16384, 0.25}};
      curves["source"] = {{"attention_efficiency_by_seq", "measured"}};
      if (sourced) curves["source"]["causal_attention_efficiency_by_seq"] = "measured";
    });
  };
  CHECK(load_cluster(with_implementation("mine.json", true, true))
            .gpu.attention_implementations.at("mine")
            .causal_efficiency_by_seq.at(16384) == 0.25);
  CHECK_THAT(
      load_error(with_implementation("no-causal.json", false, true)).what(),
      Contains("gpu.attention_implementations.mine") && Contains("causal_attention_efficiency_by_seq"));
  CHECK_THAT(load_error(with_implementation("unsourced.json", true, false)).what(),
             Contains("gpu.attention_implementations.mine.source.causal_attention_efficiency_by_seq"));
}

TEST_CASE("load_cluster: the host link and host memory of activation offload come together, sourced",
          "[hw_models]") {
  TempDir dir;
  const ClusterSpec a100 = load_cluster("dgx-a100");
  // Half the 25.7 GB/s a GPU copies alone: two GPUs share each PCIe switch's uplink.
  CHECK(a100.gpu.host_link_bytes_per_second == Approx(25.7e9 / 2).epsilon(0.001));
  CHECK(a100.gpu.host_memory_bytes == Approx(1857830712.0 * 1024 / 8).epsilon(0.001));
  // A GB200 tray's four GPUs copying to host memory at once, 674.15 GB/s in all; a Grace's 480 GB for two.
  const ClusterSpec gb200 = load_cluster("gb200-nvl72");
  CHECK(gb200.gpu.host_link_bytes_per_second == Approx(674.15e9 / 4).epsilon(0.001));
  CHECK(gb200.gpu.host_memory_bytes == Approx(480e9 / 2));
  CHECK(load_cluster("dgx-h100").gpu.host_link_bytes_per_second == 0);
  const std::string without = write_edited_a100(dir, "no-host.json", [](auto& json) {
    json["gpu"].erase("host_link_bytes_per_second");
    json["gpu"].erase("host_memory_bytes");
    json["gpu"]["source"].erase("host_link_bytes_per_second");
    json["gpu"]["source"].erase("host_memory_bytes");
  });
  CHECK(load_cluster(without).gpu.host_link_bytes_per_second == 0);
  const std::string alone = write_edited_a100(dir, "link-alone.json", [](auto& json) {
    json["gpu"].erase("host_memory_bytes");
    json["gpu"]["source"].erase("host_memory_bytes");
  });
  CHECK_THAT(load_error(alone).what(), Contains("gpu.host_link_bytes_per_second") && Contains("together"));
  const std::string unsourced = write_edited_a100(dir, "unsourced-link.json", [](auto& json) {
    json["gpu"]["source"].erase("host_link_bytes_per_second");
  });
  CHECK_THAT(load_error(unsourced).what(), Contains("gpu.source.host_link_bytes_per_second"));
}

TEST_CASE("load_cluster: the optional attention factors by blocks per SM come four together, on a GPU's SMs",
          "[hw_models]") {
  TempDir dir;
  const std::vector<std::string> curves{"forward", "backward", "causal_forward", "causal_backward"};
  const auto with_factors = [&](const std::string& name, std::size_t count, bool tiles, bool sourced = true) {
    return write_edited_a100(dir, name, [&](auto& json) {
      auto& factors = json["gpu"]["attention_time_factor_by_blocks_per_sm"];
      factors["source"] = paradyse::json_input::Json::object();
      for (std::size_t i = 0; i < count; ++i) {
        factors[curves[i]] = {{0.5, 2.0 + static_cast<double>(i)}, {16, 1.0}};
        if (sourced) factors["source"][curves[i]] = "measured";
      }
      if (!tiles) {
        json["gpu"].erase("gemm_tiles");
        json["gpu"]["gemm_efficiency_by_flops"] = {{1e9, 0.5}};
        json["gpu"]["source"]["gemm_efficiency_by_flops"] = "measured";
      }
    });
  };
  const auto occupancy = load_cluster(with_factors("four.json", 4, true)).gpu.attention_occupancy;
  REQUIRE(occupancy.has_value());
  CHECK(occupancy->forward.at(0.5) == 2.0);
  CHECK(occupancy->causal_backward.at(0.5) == 5.0);
  CHECK_FALSE(load_cluster("dgx-a100").gpu.attention_occupancy.has_value());
  CHECK_THAT(load_error(with_factors("three.json", 3, true)).what(),
             Contains("gpu.attention_time_factor_by_blocks_per_sm") && Contains("causal_backward"));
  CHECK_THAT(load_error(with_factors("unsourced.json", 4, true, false)).what(),
             Contains("gpu.attention_time_factor_by_blocks_per_sm.source.forward"));
  CHECK_THAT(load_error(with_factors("curve.json", 4, false)).what(),
             Contains("gpu.attention_time_factor_by_blocks_per_sm") && Contains("gemm_tiles"));
}

TEST_CASE(
    "load_cluster: the optional host block gives dispatch costs, by call and by kind, each with its source",
    "[hw_models]") {
  TempDir dir;
  const paradyse::json_input::Json host = {
      {"kernel_dispatch_seconds", 1e-5},
      {"communication_dispatch_seconds", 2e-5},
      {"synchronous", true},
      {"source",
       {{"kernel_dispatch_seconds", "a"}, {"communication_dispatch_seconds", "b"}, {"synchronous", "c"}}}};
  const ClusterSpec cluster = load_cluster(write_edited_a100(dir, "host.json", own_host(host)));
  CHECK(cluster.host.kernel_dispatch_s == 1e-5);
  CHECK(cluster.host.communication_dispatch_s == 2e-5);
  CHECK(cluster.host.synchronous);
  // The GPU presets' hosts: eager PyTorch's dispatch chain, asynchronous; the Hopper DGX presets' were
  // measured (tests/costmodel/measured_gpus_test.cpp).
  for (const std::string& name : paradyse::hw::cluster_preset_names()) {
    const ClusterSpec preset = load_cluster(name);
    if (name.rfind("dgx-h", 0) != 0) {
      CHECK(preset.host.kernel_dispatch_s == 1e-5);
      CHECK(preset.host.communication_dispatch_s == 1e-5);
    }
    CHECK_FALSE(preset.host.synchronous);
  }

  auto by_call = host;
  by_call["kernel_dispatch_seconds_by_call"] = {{"linear", 2e-5}, {"adam_step", 3e-6}};
  const std::string with_calls = write_edited_a100(dir, "host-by-call.json", own_host(by_call));
  CHECK_THAT(load_error(with_calls).what(), Contains("host.source.kernel_dispatch_seconds_by_call"));
  by_call["source"]["kernel_dispatch_seconds_by_call"] = "d";
  const std::string sourced_calls = write_edited_a100(dir, "host-by-call-sourced.json", own_host(by_call));
  CHECK(load_cluster(sourced_calls).host.kernel_dispatch_s_by_call ==
        std::map<std::string, double>{{"adam_step", 3e-6}, {"linear", 2e-5}});
  CHECK(load_cluster("dgx-a100").host.kernel_dispatch_s_by_call.empty());

  auto by_kind = host;
  by_kind["communication_dispatch_seconds_by_kind"] = {{"send_recv", 1.2e-4}, {"all_reduce", 6e-5}};
  const std::string with_kinds = write_edited_a100(dir, "host-by-kind.json", own_host(by_kind));
  CHECK_THAT(load_error(with_kinds).what(), Contains("host.source.communication_dispatch_seconds_by_kind"));
  by_kind["source"]["communication_dispatch_seconds_by_kind"] = "e";
  by_kind["communication_dispatch_seconds_by_kind"]["all_gather"] = -1;
  const std::string negative_kind = write_edited_a100(dir, "host-by-kind-negative.json", own_host(by_kind));
  CHECK_THAT(load_error(negative_kind).what(), Contains("communication_dispatch_seconds_by_kind.all_gather"));
  by_kind["communication_dispatch_seconds_by_kind"].erase("all_gather");
  const std::string sourced_kinds = write_edited_a100(dir, "host-by-kind-sourced.json", own_host(by_kind));
  CHECK(load_cluster(sourced_kinds).host.communication_dispatch_s_by_kind ==
        std::map<std::string, double>{{"all_reduce", 6e-5}, {"send_recv", 1.2e-4}});

  auto without_source = host;
  without_source["source"].erase("synchronous");
  const std::string unsourced = write_edited_a100(dir, "unsourced-host.json", own_host(without_source));
  CHECK_THAT(load_error(unsourced).what(), Contains("host.source.synchronous"));
  auto negative = host;
  negative["kernel_dispatch_seconds"] = -1;
  const std::string bad = write_edited_a100(dir, "negative-host.json", own_host(negative));
  CHECK_THAT(load_error(bad).what(), Contains("host.kernel_dispatch_seconds"));
}

TEST_CASE(
    "load_cluster: a fabric's all-gather, reduce-scatter and send_recv curves are optional, each sourced",
    "[hw_models]") {
  TempDir dir;
  const paradyse::json_input::Json curve = {{1024, 1e8}, {67108864, 2e9}};
  const ClusterSpec cluster = load_cluster(write_edited_a100(dir, "rings.json", [&](auto& json) {
    json["intra_node"]["all_gather_bus_bandwidth_by_bytes"] = curve;
    json["intra_node"]["source"]["all_gather_bus_bandwidth_by_bytes"] = "measured";
  }));
  REQUIRE(cluster.intra_node.all_gather_bus_bandwidth_by_bytes.points().size() == 2);
  CHECK(cluster.intra_node.all_gather_bus_bandwidth_by_bytes.at(67108864) == 2e9);
  CHECK(cluster.intra_node.reduce_scatter_bus_bandwidth_by_bytes.points().empty());
  CHECK(cluster.intra_node.send_recv_bandwidth_by_bytes.points().empty());
  const ClusterSpec pairs = load_cluster(write_edited_a100(dir, "pairs.json", [&](auto& json) {
    json["intra_node"]["send_recv_bandwidth_by_bytes"] = curve;
    json["intra_node"]["source"]["send_recv_bandwidth_by_bytes"] = "measured";
  }));
  CHECK(pairs.intra_node.send_recv_bandwidth_by_bytes.at(1024) == 1e8);
  // The presets have neither: NCCL runs all three as the same rings.
  CHECK(load_cluster("dgx-a100").inter_node.all_gather_bus_bandwidth_by_bytes.points().empty());

  const std::string unsourced = write_edited_a100(dir, "unsourced-rings.json", [&](auto& json) {
    json["inter_node"]["reduce_scatter_bus_bandwidth_by_bytes"] = curve;
  });
  CHECK_THAT(load_error(unsourced).what(),
             Contains("inter_node.source.reduce_scatter_bus_bandwidth_by_bytes"));
  const std::string unsourced_pairs = write_edited_a100(dir, "unsourced-pairs.json", [&](auto& json) {
    json["intra_node"]["send_recv_bandwidth_by_bytes"] = curve;
  });
  CHECK_THAT(load_error(unsourced_pairs).what(), Contains("intra_node.source.send_recv_bandwidth_by_bytes"));
  const std::string source_alone = write_edited_a100(dir, "source-alone.json", [&](auto& json) {
    json["intra_node"]["source"]["all_gather_bus_bandwidth_by_bytes"] = "measured";
  });
  CHECK_NOTHROW(load_cluster(source_alone));
}

TEST_CASE("load_cluster: a fabric's compute contention is optional, below 1, and sourced", "[hw_models]") {
  TempDir dir;
  const ClusterSpec cluster = load_cluster(write_edited_a100(dir, "contended.json", [&](auto& json) {
    json["intra_node"]["compute_contention"] = 0.25;
    json["intra_node"]["source"]["compute_contention"] = "measured";
  }));
  CHECK(cluster.intra_node.compute_contention == 0.25);
  CHECK(cluster.inter_node.compute_contention == 0);

  const std::string whole = write_edited_a100(dir, "whole.json", [&](auto& json) {
    json["inter_node"]["compute_contention"] = 1;
    json["inter_node"]["source"]["compute_contention"] = "measured";
  });
  CHECK_THAT(load_error(whole).what(), Contains("inter_node.compute_contention") && Contains("below 1"));
  const std::string unsourced = write_edited_a100(
      dir, "unsourced-contention.json", [&](auto& json) { json["intra_node"]["compute_contention"] = 0.1; });
  CHECK_THAT(load_error(unsourced).what(), Contains("intra_node.source.compute_contention"));
}

TEST_CASE("load_cluster: a fabric's synchronization time is optional, not negative, and sourced",
          "[hw_models]") {
  TempDir dir;
  const ClusterSpec cluster = load_cluster(write_edited_a100(dir, "synchronized.json", [&](auto& json) {
    json["intra_node"]["synchronization_seconds"] = 8.6e-4;
    json["intra_node"]["source"]["synchronization_seconds"] = "measured";
  }));
  CHECK(cluster.intra_node.synchronization_s == 8.6e-4);
  CHECK(cluster.inter_node.synchronization_s == 0);
  const std::string negative = write_edited_a100(dir, "negative-synchronization.json", [&](auto& json) {
    json["inter_node"]["synchronization_seconds"] = -1e-3;
    json["inter_node"]["source"]["synchronization_seconds"] = "measured";
  });
  CHECK_THAT(load_error(negative).what(), Contains("inter_node.synchronization_seconds"));
  const std::string unsourced = write_edited_a100(dir, "unsourced-synchronization.json", [&](auto& json) {
    json["intra_node"]["synchronization_seconds"] = 1e-3;
  });
  CHECK_THAT(load_error(unsourced).what(), Contains("intra_node.source.synchronization_seconds"));
}

TEST_CASE("load_cluster: small-message tables are optional, by collective and rank count, and sourced",
          "[hw_models]") {
  TempDir dir;
  const ClusterSpec cluster = load_cluster(write_edited_a100(dir, "small.json", [&](auto& json) {
    json["inter_node"]["small_message_seconds_by_bytes"] = {
        {"all_gather", {{"2", {{8, 10e-6}, {65536, 20e-6}}}, {"6", {{8, 30e-6}, {65536, 40e-6}}}}}};
    json["inter_node"]["source"]["small_message_seconds_by_bytes"] = "measured";
  }));
  const paradyse::hw::FabricSpec& fabric = cluster.inter_node;
  CHECK(fabric.small_message_s("all_gather", 2, 8) == Approx(10e-6));
  CHECK(fabric.small_message_s("all_gather", 4, 8) == Approx(20e-6));     // halfway between 2 and 6 ranks
  CHECK(fabric.small_message_s("all_gather", 16, 1e9) == Approx(40e-6));  // the nearest, then the last
  CHECK_FALSE(fabric.small_message_s("all_reduce", 2, 8).has_value());    // nothing to fall back on
  // The preset's own: the all-reduce's table stands in for a collective without one.
  CHECK(cluster.intra_node.small_message_s("all_to_all", 8, 4) ==
        cluster.intra_node.small_message_s("all_reduce", 8, 4));

  const auto error_for = [&](const std::string& name, const paradyse::json_input::Json& tables,
                             bool sourced) {
    return std::string(load_error(write_edited_a100(dir, name, [&](auto& json) {
                         json["intra_node"]["small_message_seconds_by_bytes"] = tables;
                         if (!sourced) json["intra_node"]["source"].erase("small_message_seconds_by_bytes");
                       })).what());
  };
  using paradyse::json_input::Json;
  const Json good = {{"all_reduce", {{"8", {{8, 1e-5}}}}}};
  CHECK_THAT(error_for("unsourced-small.json", good, false),
             Contains("intra_node.source.small_message_seconds_by_bytes"));
  CHECK_THAT(
      error_for("misspelt-small.json", Json{{"allreduce", {{"8", {{8, 1e-5}}}}}}, true),
      Contains("intra_node.small_message_seconds_by_bytes.allreduce") && Contains("all_reduce, all_gather"));
  CHECK_THAT(error_for("one-rank-small.json", Json{{"all_reduce", {{"1", {{8, 1e-5}}}}}}, true),
             Contains("all_reduce.1") && Contains("rank count of at least 2"));
  CHECK_THAT(error_for("unit-slip-small.json", Json{{"all_reduce", {{"8", {{8, 17.0}}}}}}, true),
             Contains("all_reduce.8") && Contains("s, got 17"));
  CHECK_THAT(error_for("empty-small.json", Json::object(), true), Contains("at least one collective"));
}

TEST_CASE("load_cluster: a calibration's speed reference is optional, positive, and sourced", "[hw_models]") {
  TempDir dir;
  CHECK_FALSE(load_cluster("dgx-a100").calibration.has_value());
  auto calibrated = [](auto& json) {
    json["calibration"] = {
        {"reference_start_seconds", 0.1},
        {"reference_end_seconds", 0.3},
        {"source", {{"reference_start_seconds", "measured"}, {"reference_end_seconds", "measured"}}}};
  };
  const ClusterSpec cluster = load_cluster(write_edited_a100(dir, "calibrated.json", calibrated));
  REQUIRE(cluster.calibration.has_value());
  CHECK(cluster.calibration->seconds() == Approx(0.2));  // the mean of start and end

  const std::string zero = write_edited_a100(dir, "zero.json", [&](auto& json) {
    calibrated(json);
    json["calibration"]["reference_end_seconds"] = 0;
  });
  CHECK_THAT(load_error(zero).what(), Contains("calibration.reference_end_seconds"));
  const std::string unsourced = write_edited_a100(dir, "unsourced-reference.json", [&](auto& json) {
    calibrated(json);
    json["calibration"]["source"].erase("reference_start_seconds");
  });
  CHECK_THAT(load_error(unsourced).what(), Contains("calibration.source.reference_start_seconds"));
  const std::string half = write_edited_a100(dir, "half.json", [&](auto& json) {
    calibrated(json);
    json["calibration"].erase("reference_end_seconds");
  });
  CHECK_THAT(load_error(half).what(), Contains("calibration") && Contains("reference_end_seconds"));
}
