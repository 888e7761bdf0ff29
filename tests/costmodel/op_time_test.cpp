#include "costmodel/op_time.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "common/errors.hpp"
#include "hw_models/framework.hpp"
#include "program/tracing_backend.hpp"

using namespace paradyse;

namespace {

Op gemm_op(int64_t m, int64_t n, int64_t k) {
  Op op;
  op.kind = OpKind::gemm;
  op.kernel = Kernel::linear;
  op.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  op.memory_bytes = 2.0 * static_cast<double>(m * k + k * n + m * n);  // bf16
  op.dims = {m, n, k, 0};
  return op;
}

}  // namespace

TEST_CASE(
    "GEMMs by shape: within 12 % of public cuBLAS measurements (the A100 preset's sources, and a check on "
    "H100)",
    "[costmodel]") {
  struct Point {
    const char* cluster;
    int64_t m, n, k;
    double measured_flops_per_second;
    const char* source;
  };
  const Point points[] = {
      {"dgx-a100", 1024, 1024, 1024, 119e12, "Azure AI-benchmarking-guide, cuBLASLt FP16"},
      {"dgx-a100", 2048, 2048, 2048, 222e12, "Azure AI-benchmarking-guide, cuBLASLt FP16"},
      {"dgx-a100", 4096, 4096, 4096, 228e12, "Azure AI-benchmarking-guide, cuBLASLt FP16"},
      {"dgx-a100", 8192, 8192, 8192, 254e12, "Azure AI-benchmarking-guide, cuBLASLt FP16"},
      {"dgx-a100", 6912, 16384, 2048, 267.9e12, "ml-engineering MAMF table, A100 SXM, BF16"},
      {"dgx-h100", 6144, 17920, 2816, 792.1e12, "ml-engineering MAMF table, H100 SXM, BF16"}};
  for (const Point& p : points) {
    const hw::ClusterSpec cluster = hw::load_cluster(p.cluster);
    const Op op = gemm_op(p.m, p.n, p.k);
    const double predicted = op.flops / costmodel::OpTimer(cluster, 8).seconds(op);
    INFO(p.cluster << " " << p.m << "x" << p.n << "x" << p.k << " (" << p.source << "): predicted "
                   << predicted / 1e12 << " TFLOP/s");
    CHECK(std::abs(predicted / p.measured_flops_per_second - 1) <= 0.12);
  }
}

TEST_CASE("GEMMs by shape: one row past a full wave costs a fifth wave of the smallest tiles",
          "[costmodel]") {
  // m = 108·256 rows by one 128-wide column: 108 tiles of 256×128 fill the A100's 108 SMs once, as
  // do 432 tiles of 64×128 in four quarter-size waves. One more row needs a 109th large tile (two
  // waves) or a 433rd small one (a fifth quarter-size wave): 1.25× the time, the best of the shapes.
  const hw::GpuSpec gpu = hw::load_cluster("dgx-a100").gpu;
  const double full = costmodel::gemm_arithmetic_s(gpu, 1, 108 * 256, 128, 4096);
  CHECK(costmodel::gemm_arithmetic_s(gpu, 1, 108 * 256 + 1, 128, 4096) / full == Approx(1.25));
  // Fewer rows than a wave holds cost as much as the full wave: the idle SMs do nothing faster.
  CHECK(costmodel::gemm_arithmetic_s(gpu, 1, 108 * 256 - 255, 128, 4096) == Approx(full));
  // A batch of GEMMs shares the waves: two of half the rows take what one of all of them does.
  CHECK(costmodel::gemm_arithmetic_s(gpu, 2, 54 * 256, 128, 4096) == Approx(full));
}

TEST_CASE("GEMMs by shape: a skinny GEMM is bound by its memory traffic", "[costmodel]") {
  // 16 tokens through a 12288×12288 weight: 2·16·12288² FLOPs but 302 MB of weight to read.
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const Op op = gemm_op(16, 12288, 12288);
  CHECK(costmodel::OpTimer(cluster, 8).seconds(op) ==
        Approx(op.memory_bytes / cluster.gpu.hbm_bytes_per_second + cluster.gpu.kernel_launch_s));
  CHECK(costmodel::gemm_arithmetic_s(cluster.gpu, 1, 16, 12288, 12288) <
        op.memory_bytes / cluster.gpu.hbm_bytes_per_second);
}

TEST_CASE("OpTimer: memory-bound kernels move their bytes at HBM copy bandwidth", "[costmodel]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-h100");
  const costmodel::OpTimer timer(cluster, 8);
  Op op;
  op.kind = OpKind::memory_bound;
  op.kernel = Kernel::concat;  // a call the preset has no measured rate of
  op.memory_bytes = 1e9;
  REQUIRE(timer.seconds(op) ==
          Approx(1e9 / cluster.gpu.hbm_bytes_per_second + cluster.gpu.kernel_launch_s).epsilon(1e-12));
}

TEST_CASE("OpTimer: a collective takes bus bytes over NCCL's bus bandwidth at its size", "[costmodel]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const costmodel::OpTimer intra(cluster, 8);
  // 1 GiB all-reduce on 8 A100s: 228.1 GB/s bus bandwidth (nccl-tests all_reduce_perf, NCCL 2.18-2.20, in
  // the Azure AI-benchmarking-guide's results; the dgx-a100 preset's curve).
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
  SECTION("an all-gather or reduce-scatter the fabric measured takes its own measured time") {
    // A CPU backend's: Gloo's all-gather, and a reduce-scatter that is an all-to-all and a sum.
    hw::ClusterSpec measured = cluster;
    measured.intra_node.small_message_s_by_bytes.clear();  // a CPU fabric measures every size itself
    measured.intra_node.all_gather_bus_bandwidth_by_bytes =
        hw::Curve({{1e6, 20e9}, {1e9, 150e9}, {1e10, 160e9}});
    measured.intra_node.reduce_scatter_bus_bandwidth_by_bytes =
        hw::Curve({{1e6, 10e9}, {1e9, 90e9}, {1e10, 95e9}});
    const costmodel::OpTimer timer(measured, 8);
    for (const double size : {1e6, 1e9}) {
      op.size_bytes = size;
      op.bus_bytes = 7.0 / 8 * size;
      op.kind = OpKind::all_gather;
      CHECK(timer.seconds(op) ==
            Approx(op.bus_bytes / measured.intra_node.all_gather_bus_bandwidth_by_bytes.at(size))
                .epsilon(1e-12));
      op.kind = OpKind::reduce_scatter;
      CHECK(timer.seconds(op) ==
            Approx(op.bus_bytes / measured.intra_node.reduce_scatter_bus_bandwidth_by_bytes.at(size))
                .epsilon(1e-12));
      // The all-reduce keeps its own curve.
      op.kind = OpKind::all_reduce;
      op.bus_bytes = 2.0 * 7 / 8 * size;
      CHECK(timer.seconds(op) == Approx(intra.seconds(op)).epsilon(1e-12));
    }
  }
  SECTION("a send_recv the fabric measured takes its own measured time, else the all-reduce's rate") {
    // A CPU backend's: Gloo's pairs, each rank sending to one peer while it receives from another.
    hw::ClusterSpec measured = cluster;
    measured.intra_node.send_recv_bandwidth_by_bytes = hw::Curve({{1e6, 5e9}, {1e9, 40e9}, {1e10, 45e9}});
    const costmodel::OpTimer timer(measured, 8);
    op.kind = OpKind::send_recv;
    for (const double size : {1e6, 1e9}) {
      op.size_bytes = op.bus_bytes = size;
      CHECK(timer.seconds(op) ==
            Approx(size / measured.intra_node.send_recv_bandwidth_by_bytes.at(size)).epsilon(1e-12));
      // Without the curve: one hop, then the bytes at the all-reduce's streaming rate.
      CHECK(intra.seconds(op) ==
            Approx(hop + size / cluster.intra_node.streaming_bandwidth(size)).epsilon(1e-12));
    }
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
  SECTION("tiny messages take their measured latency-bound time, above the hops' latency") {
    op.size_bytes = 4;
    op.bus_bytes = 7;
    // nccl-tests, 8 A100 of ABCI's node A, one process per GPU: 17.29 us at 4 B.
    REQUIRE(intra.seconds(op) == Approx(17.29e-6).epsilon(1e-4));
    REQUIRE(intra.seconds(op) >= cluster.intra_node.latency_s);
  }
  SECTION("a group wider than a node goes over the NICs") {
    const hw::ClusterSpec two = hw::load_cluster("dgx-a100", 2);
    const costmodel::OpTimer inter(two, 16);
    op.bus_bytes = 2.0 * 15 / 16 * op.size_bytes;
    REQUIRE(inter.seconds(op) > intra.seconds(op));
    // Eight rings, one per NIC, each carrying an eighth of the bytes at its NIC's 23.5 GB/s: the
    // curve's peak. Their longest route is an NVLink hop inside a node, their 29 other steps the NICs'.
    REQUIRE(two.inter_node.peak_bus_bandwidth() == Approx(8 * 23.5e9));
    REQUIRE(inter.seconds(op) == Approx(two.intra_node.hop_latency_s() + 29 * two.inter_node.hop_latency_s() +
                                        op.bus_bytes / two.inter_node.streaming_bandwidth(op.size_bytes))
                                     .epsilon(1e-12));
  }
  SECTION("a group with k GPUs in each of its nodes crosses nodes on their k NICs") {
    // Every t-th GPU of 4 nodes (a 2-D strategy's ring over its groups of t): 8/t GPUs in each node,
    // each on its own 23.5 GB/s HDR NIC, where a ring that fills its nodes streams at the curve's peak.
    const hw::ClusterSpec four = hw::load_cluster("dgx-a100", 4);
    const costmodel::OpTimer timer(four, 32);
    op.kind = OpKind::all_gather;
    for (const int t : {2, 4, 8}) {
      INFO("every " << t << "-th GPU");
      op.group_size = static_cast<int16_t>(32 / t);
      op.group_stride = static_cast<int16_t>(t);
      const double k = 8.0 / t;
      op.bus_bytes = (op.group_size - 1.0) / op.group_size * op.size_bytes;
      const double streaming =
          four.inter_node.streaming_bandwidth(op.size_bytes, hw::FabricSpec::Collective::all_gather);
      const double nics = std::min(1.0, k * 23.5e9 / four.inter_node.peak_bus_bandwidth());
      // The longest route: an NVLink hop where the ring walks inside a node.
      const double longest_hop_s = k > 1 ? four.intra_node.hop_latency_s() : four.inter_node.hop_latency_s();
      CHECK(timer.seconds(op) ==
            Approx(longest_hop_s + (op.group_size - 2) * four.inter_node.hop_latency_s() +
                   op.bus_bytes / (streaming * nics))
                .epsilon(1e-12));
    }
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

TEST_CASE("OpTimer: fused attention runs at the speed of the implementation the cluster runs",
          "[costmodel]") {
  // Dao-AILab/flash-attention's A100 chart, forward+backward, head dim 128: FlashAttention-2 against its
  // Triton FlashAttention, TFLOP/s at 2K tokens causal and 8K non-causal.
  struct Point {
    int64_t keys;
    bool causal;
    double flash_attention_2, triton;
  };
  const Point points[] = {{2048, true, 155, 68}, {8192, false, 201, 95}};
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  for (const Point& p : points) {
    Op op;
    op.kind = OpKind::attention_backward;
    op.kernel = Kernel::attention_backward;
    op.partially_masked = p.causal;
    op.flops = 1e12;  // arithmetic-bound: no memory traffic
    op.dims = {16, p.keys, p.keys, 128};
    hw::use_attention_implementation(cluster, "", "--attention-implementation");
    const double flash_attention_2_s =
        costmodel::OpTimer(cluster, 8).seconds(op) - cluster.gpu.kernel_launch_s;
    hw::use_attention_implementation(cluster, "flash-attention-triton", "--attention-implementation");
    const double triton_s = costmodel::OpTimer(cluster, 8).seconds(op) - cluster.gpu.kernel_launch_s;
    INFO(p.keys << " keys, causal " << p.causal);
    CHECK(op.flops / flash_attention_2_s == Approx(p.flash_attention_2 * 1e12).epsilon(1e-3));
    CHECK(op.flops / triton_s == Approx(p.triton * 1e12).epsilon(1e-3));
  }
}

TEST_CASE(
    "OpTimer: a call or a communication kind with its own host cost is issued at it, the others at the "
    "default",
    "[costmodel]") {
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  cluster.host.kernel_dispatch_s = 1e-5;
  cluster.host.communication_dispatch_s = 3e-5;
  cluster.host.kernel_dispatch_s_by_call["attention_backward"] = 7e-5;
  Op attention;
  attention.kind = OpKind::attention_backward;
  attention.kernel = Kernel::attention_backward;
  Op gelu;
  gelu.kind = OpKind::memory_bound;
  gelu.kernel = Kernel::gelu;
  Op all_gather;
  all_gather.kind = OpKind::all_gather;
  all_gather.kernel = Kernel::communication;
  const costmodel::OpTimer timer(cluster, 8);
  CHECK(timer.dispatch_s(attention) == 7e-5);
  CHECK(timer.dispatch_s(gelu) == 1e-5);
  CHECK(timer.dispatch_s(all_gather) == 3e-5);

  // A figure under a name that is not what `field` names: the timer refuses it, naming the field.
  const auto refuses = [&](std::map<std::string, double> hw::HostSpec::*entries, const std::string& field,
                           const char* name) {
    INFO(name);
    hw::ClusterSpec bad = cluster;
    (bad.host.*entries)[name] = 1e-5;
    try {
      costmodel::OpTimer refused(bad, 8);
      FAIL("no error");
    } catch (const InputError& e) {
      CHECK(e.field() == field + "." + name);
    }
  };
  for (const char* name : {"gelux", "communication"})
    refuses(&hw::HostSpec::kernel_dispatch_s_by_call, "host.kernel_dispatch_seconds_by_call", name);

  // A kind with its own cost (Gloo's send_recv returns after writing its bytes); the others keep theirs.
  Op send_recv = all_gather;
  send_recv.kind = OpKind::send_recv;
  cluster.host.communication_dispatch_s_by_kind["send_recv"] = 1.2e-4;
  const costmodel::OpTimer by_kind(cluster, 8);
  CHECK(by_kind.dispatch_s(send_recv) == 1.2e-4);
  CHECK(by_kind.dispatch_s(all_gather) == 3e-5);
  CHECK(by_kind.dispatch_s(gelu) == 1e-5);
  for (const char* name : {"sendrecv", "gelu", "wait"})
    refuses(&hw::HostSpec::communication_dispatch_s_by_kind, "host.communication_dispatch_seconds_by_kind",
            name);
}

TEST_CASE("an op with a recorded duration takes it on any cluster", "[costmodel]") {
  Op gemm = gemm_op(4096, 4096, 4096);
  const hw::ClusterSpec a100 = hw::load_cluster("dgx-a100");
  const hw::ClusterSpec h100 = hw::load_cluster("dgx-h100");
  const costmodel::OpTimer on_a100(a100, 8), on_h100(h100, 8);
  CHECK(on_a100.compute_s(gemm) != on_h100.compute_s(gemm));
  gemm.duration_s = 1.5e-3;
  CHECK(on_a100.compute_s(gemm) == 1.5e-3);
  CHECK(on_h100.seconds(gemm) == 1.5e-3);
  gemm.duration_s = 0;  // recorded as nothing: takes nothing
  CHECK(on_a100.seconds(gemm) == 0);
}

TEST_CASE("OpTimer: small collectives take the nccl-tests times their presets cite", "[costmodel]") {
  struct Point {
    const char* cluster;
    int nodes;
    OpKind kind;
    int ranks;
    double size_bytes;
    double measured_s;
    const char* source;  // nccl-tests, out-of-place time
  };
  const Point points[] = {
      {"dgx-a100", 1, OpKind::all_reduce, 8, 4, 17.29e-6, "ABCI node A, -g 1, job08.sh.7280517"},
      {"dgx-a100", 1, OpKind::all_reduce, 8, 65536, 40.25e-6, "ABCI node A, -g 1, job08.sh.7280517"},
      {"dgx-a100", 1, OpKind::all_reduce, 8, 262144, 48.22e-6, "ABCI node A, -g 1, job08.sh.7280517"},
      {"dgx-a100", 1, OpKind::all_reduce, 4, 65536, 27.08e-6, "ABCI node A, -g 1, job04.sh.7280520"},
      {"dgx-a100", 1, OpKind::broadcast, 8, 16384, 12.62e-6, "ABCI node A, -g 1, job08.sh.7280576"},
      {"dgx-a100", 2, OpKind::all_reduce, 16, 1024, 36.44e-6, "ABCI two nodes A, -g 1, job02.sh.7194279"},
      {"dgx-h100", 1, OpKind::all_gather, 8, 4096, 34.61e-6, "Together AI, all_gather_ring.out"},
      {"dgx-h100", 1, OpKind::reduce_scatter, 4, 1024, 21.36e-6, "waynehacking8 quiet, reduce_scatter.txt"},
      {"dgx-h100", 2, OpKind::all_reduce, 16, 16384, 32.74e-6, "NVIDIA/nccl-tests#309, 2x Dell XE9680"},
  };
  for (const Point& p : points) {
    const hw::ClusterSpec cluster = hw::load_cluster(p.cluster, p.nodes);
    const costmodel::OpTimer timer(cluster, p.ranks);
    Op op;
    op.kind = p.kind;
    op.stream = Stream::communication;
    op.size_bytes = p.size_bytes;
    op.bus_bytes = p.size_bytes;
    op.root = 0;  // a broadcast's
    INFO(p.cluster << " " << to_string(p.kind) << " over " << p.ranks << " at " << p.size_bytes << " B ("
                   << p.source << ")");
    // The hops' latency and the bytes at the peak add a few ns to the tiniest.
    CHECK(timer.seconds(op) == Approx(p.measured_s).epsilon(1e-4));
  }
}

TEST_CASE("OpTimer: the small-message times meet the bandwidth curve without a step", "[costmodel]") {
  const char* cluster_name = GENERATE("dgx-a100", "dgx-h100");
  const OpKind kind = GENERATE(OpKind::all_reduce, OpKind::all_gather, OpKind::all_to_all);
  const int ranks = GENERATE(4, 8);
  const hw::ClusterSpec cluster = hw::load_cluster(cluster_name);
  const costmodel::OpTimer timer(cluster, ranks);
  CAPTURE(cluster_name, to_string(kind), ranks);
  Op op;
  op.kind = kind;
  op.stream = Stream::communication;
  const double share = (ranks - 1.0) / ranks;
  double previous_s = 0;
  // From well inside the tables to well past the curve's first point, in 1 % steps: no jump either
  // way, and no dip before the curve's first point (past it, the curve's own reading in log size
  // decides).
  const double curve_start = cluster.intra_node.bus_bandwidth_by_bytes.points().front().first;
  for (double size = 64 * 1024; size <= 16 * 1024 * 1024; size *= 1.01) {
    op.size_bytes = size;
    op.bus_bytes = (kind == OpKind::all_reduce ? 2 : 1) * share * size;
    const double seconds = timer.seconds(op);
    CAPTURE(size, seconds, previous_s);
    if (size <= curve_start) REQUIRE(seconds >= previous_s * (1 - 1e-9));
    if (previous_s > 0) REQUIRE(std::abs(seconds / previous_s - 1) <= 0.03);
    previous_s = seconds;
  }
}

TEST_CASE(
    "OpTimer: a call the framework runs as eager kernels moves their counted bytes, each kernel launched "
    "and issued",
    "[costmodel]") {
  constexpr int64_t kElements = 100'000'000;  // of x: 256 tokens x 8192 hidden, times 48
  Op norm;
  norm.kind = OpKind::memory_bound;
  norm.kernel = Kernel::norm_forward;
  norm.memory_bytes = 4.0 * kElements;  // the fused kernel reads x and writes y in bf16
  norm.dims = {kElements, 0, 0, 0};
  // torchtitan's RMSNorm: 8 kernels moving 36 bytes an element
  // (hw_models/frameworks/torchtitan-rmsnorm.json).
  hw::ClusterSpec a100 = hw::load_cluster("dgx-a100");
  const double fused_s = costmodel::OpTimer(a100, 8).seconds(norm);
  hw::use_framework(a100, hw::load_framework("torchtitan-rmsnorm"));
  const costmodel::OpTimer eager(a100, 8);
  // No measured rates on the A100: each kernel a launch and its bytes at HBM bandwidth.
  CHECK(eager.seconds(norm) ==
        Approx(8 * a100.gpu.kernel_launch_s + 36.0 * kElements / a100.gpu.hbm_bytes_per_second));
  CHECK(eager.seconds(norm) / fused_s == Approx(9.0).epsilon(0.01));  // 36 bytes against 4, launches aside
  CHECK(eager.dispatch_s(norm) == Approx(8 * a100.host.kernel_dispatch_s));
  // A call the framework runs fused, and an op that does not count its elements, keep their price.
  Op gelu = norm;
  gelu.kernel = Kernel::gelu;
  CHECK(eager.seconds(gelu) == Approx(fused_s));
  Op uncounted = norm;
  uncounted.dims = {};
  CHECK(eager.seconds(uncounted) == Approx(fused_s));

  // Where the GPU measured its elementwise add, each kernel streams at that rate.
  hw::ClusterSpec h100 = hw::load_cluster("dgx-h100");
  hw::use_framework(h100, hw::load_framework("torchtitan-rmsnorm"));
  Op add;
  add.kind = OpKind::memory_bound;
  add.kernel = Kernel::add;
  add.memory_bytes = 36.0 * kElements / 8;
  const costmodel::OpTimer h100_timer(h100, 8);
  CHECK(h100_timer.seconds(norm) == Approx(8 * h100_timer.seconds(add)));
}

TEST_CASE("the tracer counts the elements of the calls a framework may run as eager kernels", "[costmodel]") {
  constexpr int64_t kTokens = 2 * 512, kHidden = 256, kFfn = 688;
  TracingBackend be(0, 1);
  be.begin_phase(Phase::layer_forward, 0);
  const Tensor x = be.parameter("x", {2, 512, kHidden}, 0);
  const Tensor gamma = be.parameter("gamma", {kHidden}, 0);
  const Tensor gate_up = be.parameter("gate_up", {2, 512, 2 * kFfn}, 0);
  const NormOutput norm = be.norm_forward(x, gamma, Tensor(), NormKind::rms_norm);
  be.norm_backward(x, x, gamma, norm, NormKind::rms_norm);
  be.gelu(x);
  be.gelu_backward(x, x);
  const Tensor product = be.swiglu(gate_up);
  be.swiglu_backward(product, gate_up);
  const Tensor q = be.parameter("q", {2, 512, 4, 64}, 0);
  const RotaryPositions at{{TokenRange{0, 512}}, nullptr, 10000};
  be.rotary(q, at);
  be.rotary_backward(q, at);
  std::map<Kernel, int64_t> elements;
  for (const Op& op : be.program().ops) elements[op.kernel] = op.dims[0];
  for (Kernel k : {Kernel::norm_forward, Kernel::norm_backward, Kernel::gelu, Kernel::gelu_backward}) {
    INFO(to_string(k));
    CHECK(elements.at(k) == kTokens * kHidden);
  }
  CHECK(elements.at(Kernel::swiglu) == kTokens * kFfn);
  CHECK(elements.at(Kernel::swiglu_backward) == kTokens * kFfn);
  CHECK(elements.at(Kernel::rotary) == kTokens * 4 * 64);
  CHECK(elements.at(Kernel::rotary_backward) == kTokens * 4 * 64);

  // torchtitan's SwiGLU: its eager product moves 10 bytes an element in 2 kernels, its backward 18 in 3.
  hw::ClusterSpec a100 = hw::load_cluster("dgx-a100");
  hw::use_framework(a100, hw::load_framework("torchtitan-fused-rmsnorm"));
  const costmodel::OpTimer timer(a100, 1);
  const auto priced = [&](Kernel kernel) {
    for (const Op& op : be.program().ops)
      if (op.kernel == kernel) return timer.seconds(op);
    FAIL("no " << to_string(kernel));
    return 0.0;
  };
  const double launch_s = a100.gpu.kernel_launch_s, hbm = a100.gpu.hbm_bytes_per_second;
  CHECK(priced(Kernel::swiglu) == Approx(2 * launch_s + 10.0 * kTokens * kFfn / hbm));
  CHECK(priced(Kernel::swiglu_backward) == Approx(3 * launch_s + 18.0 * kTokens * kFfn / hbm));
  // Its rotary embedding in fp32 complex: 3 kernels and 20.1 bytes an element forward, 4 and 20.3 back.
  constexpr double kRotaryElements = kTokens * 4 * 64;
  CHECK(priced(Kernel::rotary) == Approx(3 * launch_s + 20.1 * kRotaryElements / hbm));
  CHECK(priced(Kernel::rotary_backward) == Approx(4 * launch_s + 20.3 * kRotaryElements / hbm));
  // Its RMSNorm is its fused Triton kernel: the norm keeps the fused price.
  CHECK(priced(Kernel::norm_forward) == Approx(launch_s + (4.0 * kTokens * kHidden + 4.0 * kTokens) / hbm));
}
