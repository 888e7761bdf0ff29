#include "costmodel/op_time.hpp"

#include <catch2/catch.hpp>

#include "common/errors.hpp"

using namespace paradyse;

TEST_CASE("OpTimer: a GEMM runs at the preset's efficiency for its size", "[costmodel]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const costmodel::OpTimer timer(cluster, 8);
  // 8192³ GEMM: 2·8192³ FLOPs at the cuBLASLt figure of REFERENCE.md §3 (254 of 312 TFLOP/s).
  Op op;
  op.kind = OpKind::gemm;
  op.flops = 2.0 * 8192 * 8192 * 8192;
  op.memory_bytes = 3 * 2.0 * 8192 * 8192;
  const double expected = op.flops / 254e12 + cluster.gpu.kernel_launch_s;
  REQUIRE(timer.seconds(op) == Approx(expected).epsilon(0.01));
}

TEST_CASE("OpTimer: memory-bound kernels move their bytes at HBM copy bandwidth", "[costmodel]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-h100");
  const costmodel::OpTimer timer(cluster, 8);
  Op op;
  op.kind = OpKind::memory_bound;
  op.memory_bytes = 1e9;
  REQUIRE(timer.seconds(op) ==
          Approx(1e9 / cluster.gpu.hbm_bytes_per_second + cluster.gpu.kernel_launch_s).epsilon(1e-12));
}

TEST_CASE("OpTimer: a collective takes bus bytes over NCCL's bus bandwidth at its size", "[costmodel]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const costmodel::OpTimer intra(cluster, 8);
  // 1 GiB all-reduce on 8 A100s: REFERENCE.md §3 measures 228.1 GB/s bus bandwidth.
  Op op;
  op.kind = OpKind::all_reduce;
  op.stream = Stream::communication;
  op.size_bytes = 1024.0 * 1024 * 1024;
  op.bus_bytes = 2.0 * 7 / 8 * op.size_bytes;
  // The measured all-reduce is reproduced exactly: its 14 hops' latency plus the streaming time.
  REQUIRE(intra.seconds(op) == Approx(op.bus_bytes / 228.1e9).epsilon(1e-12));
  const double hop = cluster.intra_node.latency_s / 14;
  REQUIRE(cluster.intra_node.hop_latency_s() == Approx(hop));

  SECTION("1 MiB, where latency is a fifth of the time, is still the measured time") {
    op.size_bytes = 1024.0 * 1024;
    op.bus_bytes = 2.0 * 7 / 8 * op.size_bytes;
    REQUIRE(intra.seconds(op) == Approx(op.bus_bytes / 36.2e9).epsilon(1e-12));
  }
  SECTION("an all-gather of the same size pays half the hops and half the bytes") {
    op.kind = OpKind::all_gather;
    op.bus_bytes = 7.0 / 8 * op.size_bytes;
    const double streaming = 2.0 * 7 / 8 * op.size_bytes / (op.bus_bytes * 2 / 228.1e9 - 14 * hop);
    REQUIRE(intra.seconds(op) == Approx(7 * hop + op.bus_bytes / streaming).epsilon(1e-12));
  }
  SECTION("all-to-all runs at the preset's fraction of the ring, after one hop") {
    op.kind = OpKind::all_to_all;
    op.bus_bytes = 7.0 / 8 * op.size_bytes;
    const double streaming = cluster.intra_node.streaming_bandwidth(op.size_bytes);
    REQUIRE(streaming > 228.1e9);
    REQUIRE(streaming < 231.6e9);
    REQUIRE(
        intra.seconds(op) ==
        Approx(hop + op.bus_bytes / (streaming * cluster.intra_node.all_to_all_efficiency)).epsilon(1e-12));
  }
  SECTION("tiny messages pay the hops' latency and stream at the peak") {
    op.size_bytes = 64;
    op.bus_bytes = 112;
    REQUIRE(intra.seconds(op) == Approx(cluster.intra_node.latency_s + 112 / 231.6e9).epsilon(1e-12));
  }
  SECTION("a group wider than a node goes over the NICs") {
    const hw::ClusterSpec two = hw::load_cluster("dgx-a100", 2);
    const costmodel::OpTimer inter(two, 16);
    op.bus_bytes = 2.0 * 15 / 16 * op.size_bytes;
    REQUIRE(inter.seconds(op) > intra.seconds(op));
    REQUIRE(inter.seconds(op) == Approx(30 * two.inter_node.hop_latency_s() +
                                        op.bus_bytes / two.inter_node.streaming_bandwidth(op.size_bytes))
                                     .epsilon(1e-12));
  }
}

namespace {
hw::ClusterSpec with_measured(const std::string& kernel, bool by_flops) {
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  cluster.gpu.kernel_rates[kernel] = hw::KernelRate{by_flops, hw::Curve({{1e6, 1e9}, {1e8, 4e9}})};
  return cluster;
}
}  // namespace

TEST_CASE("OpTimer: a call the cluster measured runs at its measured rate, launch included", "[costmodel]") {
  Op softmax;
  softmax.kind = OpKind::memory_bound;
  softmax.kernel = Kernel::softmax;
  softmax.memory_bytes = 1e8;
  Op gelu = softmax;
  gelu.kernel = Kernel::gelu;
  const hw::ClusterSpec cluster = with_measured("softmax", false);
  const costmodel::OpTimer timer(cluster, 8);
  CHECK(timer.seconds(softmax) == Approx(1e8 / 4e9));
  // Other calls keep the roofline.
  CHECK(timer.seconds(gelu) == Approx(1e8 / cluster.gpu.hbm_bytes_per_second + cluster.gpu.kernel_launch_s));

  Op scores;
  scores.kind = OpKind::scores_gemm;
  scores.kernel = Kernel::scores;
  scores.flops = 1e7;
  scores.memory_bytes = 1e12;  // a by-FLOPs rate ignores the bytes
  const hw::ClusterSpec measured_scores = with_measured("scores", true);
  CHECK(costmodel::OpTimer(measured_scores, 8).seconds(scores) == Approx(1e7 / 2.5e9));
}

TEST_CASE("OpTimer: a measured kernel that is no backend call is an InputError", "[costmodel]") {
  for (const char* name : {"softmaxx", "communication", "wait"}) {
    INFO(name);
    const hw::ClusterSpec cluster = with_measured(name, false);
    try {
      costmodel::OpTimer timer(cluster, 8);
      FAIL("no error");
    } catch (const InputError& e) {
      CHECK(e.field() == std::string("gpu.kernels.") + name);
      CHECK(e.file() == cluster.source);
    }
  }
}
