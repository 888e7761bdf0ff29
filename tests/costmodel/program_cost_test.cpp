#include "costmodel/program_cost.hpp"

#include <catch2/catch.hpp>

#include "common/json_input.hpp"
#include "hw_models/framework.hpp"
#include "program/tracing_backend.hpp"

using namespace paradyse;

namespace {

// A cluster whose every op time is easy to compute: 1 FLOP/s-free GEMMs are replaced by
// memory-bound ops of known bytes, and communication by a flat bus bandwidth.
hw::ClusterSpec flat_cluster() {
  hw::ClusterSpec c = hw::load_cluster("dgx-a100");
  c.gpu.kernel_launch_s = 0;
  c.gpu.hbm_bytes_per_second = 1e9;  // 1 byte per ns
  c.intra_node.bus_bandwidth_by_bytes = hw::Curve({{1, 1e9}, {2, 1e9}});
  c.intra_node.latency_s = 0;
  c.intra_node.small_message_s_by_bytes.clear();  // no measured floor under the flat bandwidth
  c.host = {};                                    // ops issue at no cost unless a test says otherwise
  return c;
}

}  // namespace

TEST_CASE("cost_phases: communication overlaps compute exactly where the program allows", "[costmodel]") {
  const hw::ClusterSpec cluster = flat_cluster();
  const costmodel::OpTimer timer(cluster, 2);
  TracingBackend be(0, 2);
  be.begin_phase(Phase::layer_forward, 0);
  Tensor a = be.zeros({1000}, DType::u8);        // compute 1 µs (1000 bytes written)
  Pending gathered = be.all_gather_async(a, 0);  // [2000] bytes: bus bytes 1000 → 1 µs, after a
  Tensor b = be.zeros({3000}, DType::u8);        // compute 3 µs, independent: overlaps the gather
  Tensor g = gathered.wait();
  Tensor c = be.add(b, be.view(be.slice(b, 0, 0, 3000), {3000}));  // 9000 bytes: 9 µs
  const Program program = be.program();
  const auto phases = costmodel::cost_phases(program, timer);
  REQUIRE(phases.size() == 1);
  const costmodel::SegmentCost& cost = phases[0].cost;
  // compute: zeros a (1) + zeros b (3) + add (9) = 13 µs; the gather (1 µs, from 1 to 2) hides under b.
  REQUIRE(cost.compute_s == Approx(13e-6));
  REQUIRE(cost.communication_s == Approx(1e-6));
  REQUIRE(cost.seconds == Approx(13e-6));
  REQUIRE(cost.exposed_communication_s() == Approx(0).margin(1e-15));
}

TEST_CASE("cost_phases: a wait exposes communication the compute stream cannot hide", "[costmodel]") {
  const hw::ClusterSpec cluster = flat_cluster();
  const costmodel::OpTimer timer(cluster, 2);
  TracingBackend be(0, 2);
  be.begin_phase(Phase::layer_forward, 0);
  Tensor a = be.zeros({1000}, DType::u8);                       // 1 µs
  Tensor big = be.all_gather(be.zeros({10000}, DType::u8), 0);  // zeros 10 µs, then gather 10 µs, waited
  Tensor b = be.zeros({1000}, DType::u8);                       // 1 µs after the wait
  const auto phases = costmodel::cost_phases(be.program(), timer);
  const costmodel::SegmentCost& cost = phases[0].cost;
  REQUIRE(cost.seconds == Approx(22e-6));
  REQUIRE(cost.exposed_communication_s() == Approx(10e-6));
}

TEST_CASE("cost_phases: memory peak and delta follow tensor lifetimes", "[costmodel]") {
  const hw::ClusterSpec cluster = flat_cluster();
  const costmodel::OpTimer timer(cluster, 1);
  TracingBackend be(0, 1);
  Tensor before = be.zeros({100}, DType::u8);  // before the first phase: not in it
  be.begin_phase(Phase::layer_forward, 0);
  Tensor kept = be.zeros({1000}, DType::u8);
  {
    Tensor transient = be.zeros({5000}, DType::fp32);  // 20000 bytes, freed at the end of the block
    Tensor view = be.slice(transient, 0, 0, 10);       // a view keeps the whole buffer alive
  }
  be.begin_phase(Phase::layer_backward, 0);
  kept = Tensor();
  const auto phases = costmodel::cost_phases(be.program(), timer);
  REQUIRE(phases[0].cost.memory_peak_bytes == Approx(21000));
  REQUIRE(phases[0].cost.memory_delta_bytes == Approx(1000));
  REQUIRE(phases[1].cost.memory_delta_bytes == Approx(-1000));

  SECTION("then() folds segments: the later peak counts from the earlier delta") {
    costmodel::SegmentCost folded = phases[0].cost;
    costmodel::SegmentCost again = phases[0].cost;
    folded.then(again);
    REQUIRE(folded.memory_peak_bytes == Approx(22000));
    REQUIRE(folded.memory_delta_bytes == Approx(2000));
  }
}

namespace {

// A chain of n tiny dependent ops (30 bytes each: 30 ns at 1 byte/ns).
Program tiny_chain(int n) {
  TracingBackend be(0, 1);
  be.begin_phase(Phase::layer_forward, 0);
  Tensor x = be.zeros({10}, DType::u8);
  for (int i = 1; i < n; ++i) x = be.add(x, x);
  return be.take_program();
}

// Two GEMMs of 2·4096³ FLOPs, the second on the first's output.
Program two_gemms() {
  TracingBackend be(0, 1);
  be.begin_phase(Phase::layer_forward, 0);
  const Tensor w = be.parameter("w", {4096, 4096}, 0);
  const Tensor x = be.parameter("x", {4096, 4096}, 0);
  be.linear(be.linear(x, w), w);
  return be.take_program();
}

double seconds(const Program& program, const hw::ClusterSpec& cluster) {
  const costmodel::OpTimer timer(cluster, 1);
  return costmodel::cost_phases(program, timer).at(0).cost.seconds;
}

}  // namespace

TEST_CASE("cost_phases: the host issues ops at its dispatch cost, short kernels wait for it", "[costmodel]") {
  hw::ClusterSpec cluster = flat_cluster();
  const Program chain = tiny_chain(100);
  const Program gemms = two_gemms();
  const double device_chain_s = seconds(chain, cluster);
  const double gemm_s = seconds(gemms, cluster) / 2;
  REQUIRE(device_chain_s == Approx(10e-9 + 99 * 30e-9));  // no host costs: the kernels alone
  REQUIRE(gemm_s > 100e-6);

  cluster.host.kernel_dispatch_s = 10e-6;
  // Launch-bound: each op waits for its issue; the last ends 30 ns after it.
  CHECK(seconds(chain, cluster) == Approx(100 * 10e-6 + 30e-9));
  // A long GEMM hides the host: only the first issue shows.
  CHECK(seconds(gemms, cluster) == Approx(10e-6 + 2 * gemm_s));

  // A synchronous host (a CPU) issues the next op only when the last one ended.
  cluster.host.synchronous = true;
  CHECK(seconds(chain, cluster) == Approx(100 * 10e-6 + device_chain_s));
  CHECK(seconds(gemms, cluster) == Approx(2 * (10e-6 + gemm_s)));
}

TEST_CASE("cost_phases: a read_scalar drains the queue: the host issues nothing more until it ends",
          "[costmodel]") {
  hw::ClusterSpec cluster = flat_cluster();
  const double gemm_s = seconds(two_gemms(), cluster) / 2;
  REQUIRE(gemm_s > 200e-6);  // long enough to hide ten dispatches
  cluster.host.kernel_dispatch_s = 10e-6;
  // zeros (10 bytes) issued at 10 µs; the GEMM at 20 µs, running until 20 µs + G; then, with or without
  // a read of one of its elements, ten adds of 30 ns on the first tensor.
  const auto program = [](bool read) {
    TracingBackend be(0, 1);
    be.begin_phase(Phase::layer_forward, 0);
    const Tensor w = be.parameter("w", {4096, 4096}, 0);
    Tensor t = be.zeros({10}, DType::u8);
    const Tensor y = be.linear(w, w);
    if (read) be.read_scalar(be.view(be.slice(be.view(y, {4096 * 4096}), 0, 0, 1), {1}));
    for (int i = 0; i < 10; ++i) t = be.add(t, t);
    return be.take_program();
  };
  // Without it the host runs ahead: the adds are queued behind the GEMM and run right after it.
  CHECK(seconds(program(false), cluster) == Approx(20e-6 + gemm_s + 10 * 30e-9));
  // With it the host waits for the GEMM and the 2-byte read, then issues each add 10 µs after the last.
  CHECK(seconds(program(true), cluster) == Approx(20e-6 + gemm_s + 2e-9 + 10 * 10e-6 + 30e-9));
}

TEST_CASE("cost_phases: a synchronous host waits for a waited communication, not for its launch",
          "[costmodel]") {
  hw::ClusterSpec cluster = flat_cluster();
  cluster.host.synchronous = true;
  cluster.host.kernel_dispatch_s = 1e-6;
  cluster.host.communication_dispatch_s = 2e-6;
  const costmodel::OpTimer timer(cluster, 2);
  TracingBackend be(0, 2);
  be.begin_phase(Phase::layer_forward, 0);
  const Tensor a = be.zeros({1000}, DType::u8);  // issued at 1 µs, runs 1 µs: ends at 2
  Pending gathered = be.all_gather_async(a, 0);  // issued at 4 µs, 1 µs on the wire: ends at 5
  const Tensor b = be.zeros({1000}, DType::u8);  // issued at 5 µs (the host did not wait), ends at 6
  const Tensor g = gathered.wait();              // the host blocks until 6 (the stream is busy)
  be.zeros({1000}, DType::u8);                   // issued at 7, ends at 8
  CHECK(costmodel::cost_phases(be.program(), timer).at(0).cost.seconds == Approx(8e-6));
}

TEST_CASE("cost_phases: compute beside a collective runs at 1 − its fabric's contention", "[costmodel]") {
  hw::ClusterSpec cluster = flat_cluster();
  cluster.intra_node.compute_contention = 0.5;
  const costmodel::OpTimer timer(cluster, 2);
  SECTION("a collective issued before the compute it overlaps") {
    TracingBackend be(0, 2);
    be.begin_phase(Phase::layer_forward, 0);
    Tensor a = be.zeros({1000}, DType::u8);        // 1 µs
    Pending gathered = be.all_gather_async(a, 0);  // 1 µs, from 1 to 2
    Tensor b = be.zeros({3000}, DType::u8);        // 3 µs of work from 1: half speed until 2
    Tensor g = gathered.wait();
    Tensor c = be.zeros({9000}, DType::u8);  // 9 µs
    const costmodel::SegmentCost cost = costmodel::cost_phases(be.program(), timer)[0].cost;
    // 1 + (1 µs at half speed, then 2.5 µs) + 9: the compute is longer by the contention × the overlap.
    CHECK(cost.seconds == Approx(13.5e-6));
    CHECK(cost.compute_s == Approx(13.5e-6));
    CHECK(cost.communication_s == Approx(1e-6));
  }
  SECTION("a collective that starts under compute issued before it") {
    TracingBackend be(0, 2);
    be.begin_phase(Phase::layer_forward, 0);
    Tensor a = be.zeros({1000}, DType::u8);   // 1 µs
    Tensor b = be.zeros({10000}, DType::u8);  // 10 µs from 1; the gather below runs from 1 to 2
    Tensor g = be.all_gather(a, 0);
    const costmodel::SegmentCost cost = costmodel::cost_phases(be.program(), timer)[0].cost;
    CHECK(cost.seconds == Approx(11.5e-6));
    CHECK(cost.compute_s == Approx(11.5e-6));
  }
  SECTION("no contention, no change") {
    cluster.intra_node.compute_contention = 0;
    TracingBackend be(0, 2);
    be.begin_phase(Phase::layer_forward, 0);
    Tensor a = be.zeros({1000}, DType::u8);
    Tensor b = be.zeros({10000}, DType::u8);
    Tensor g = be.all_gather(a, 0);
    CHECK(costmodel::cost_phases(be.program(), costmodel::OpTimer(cluster, 2))[0].cost.seconds ==
          Approx(11e-6));
  }
}

TEST_CASE("cost_phases: a host-bound chain takes its framework's cost per call", "[costmodel]") {
  // Small adds, which a GPU runs faster than eager PyTorch issues them, after a first phase that
  // starts the host level with the device: the second phase takes its calls' host costs.
  TracingBackend be(0, 1);
  be.begin_phase(Phase::layer_forward, 0);
  Tensor x = be.zeros({1024}, DType::bf16);
  be.begin_phase(Phase::layer_forward, 1);
  constexpr int kAdds = 20;
  for (int i = 0; i < kAdds; ++i) x = be.add(x, x);
  const Program program = be.take_program();

  hw::ClusterSpec ideal = hw::load_cluster("dgx-a100");
  hw::use_framework(ideal, hw::load_framework("no-host-cost"));
  const costmodel::SegmentCost device =
      costmodel::cost_phases(program, costmodel::OpTimer(ideal, 1)).at(1).cost;
  const double device_s = device.seconds;
  CHECK(device.host_bound_s == 0);
  for (const char* framework : {"eager-pytorch-h100-host", "eager-pytorch-h200-host"}) {
    INFO(framework);
    hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
    hw::use_framework(cluster, hw::load_framework(framework));
    const double add_s = json_input::load_file(std::string("hw_models/frameworks/") + framework + ".json")
                             .at("host")
                             .at("kernel_dispatch_seconds_by_call")
                             .at("add")
                             .get<double>();
    REQUIRE(add_s > device_s / kAdds);  // host-bound
    const costmodel::SegmentCost cost =
        costmodel::cost_phases(program, costmodel::OpTimer(cluster, 1)).at(1).cost;
    CHECK(cost.seconds == Approx(kAdds * add_s).epsilon(1e-12));
    // The GPU's own time of the phase; the rest it waits for the host.
    CHECK(cost.host_bound_s == Approx(kAdds * add_s - device_s).epsilon(1e-12));
    CHECK(cost.exposed_communication_s() == Approx(0).margin(1e-15));
  }
}

TEST_CASE("cost_phases: the compute stream's waits for the host are the host-bound time", "[costmodel]") {
  // Three 1 µs kernels, each issued 5 µs after the one before: they run at 5-6, 10-11 and 15-16 µs.
  hw::ClusterSpec cluster = flat_cluster();
  cluster.host.kernel_dispatch_s = 5e-6;
  TracingBackend be(0, 1);
  be.begin_phase(Phase::layer_forward, 0);
  for (int i = 0; i < 3; ++i) (void)be.zeros({1000}, DType::u8);
  const costmodel::SegmentCost cost =
      costmodel::cost_phases(be.program(), costmodel::OpTimer(cluster, 1)).at(0).cost;
  CHECK(cost.seconds == Approx(16e-6));
  CHECK(cost.compute_s == Approx(3e-6));
  CHECK(cost.host_bound_s == Approx(13e-6));
  CHECK(cost.exposed_communication_s() == Approx(0).margin(1e-15));
}
