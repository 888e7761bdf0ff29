// The simulator against closed forms on cases simple enough to have one (issue acceptance 1).
#include <catch2/catch.hpp>

#include "common/units.hpp"
#include "costmodel/op_time.hpp"
#include "costmodel/program_cost.hpp"
#include "sim/simulator.hpp"
#include "tests/sim/sim_helpers.hpp"

using namespace paradyse;
using testing::flat_cluster;
using testing::lone_collective;

namespace {}

TEST_CASE("simulator: a lone ring collective takes its bus bytes at the link rate plus one hop per step",
          "[sim]") {
  const int p = GENERATE(4, 8);
  const double S = GENERATE(1 * kMiB, 256 * kMiB);
  const double B = 100e9;
  const hw::ClusterSpec cluster = flat_cluster(p, 1, B);
  const double hop = cluster.intra_node.hop_latency_s();
  sim::Simulator simulator(cluster);
  CAPTURE(p, S);

  const double all_reduce = simulator.run(lone_collective(OpKind::all_reduce, p, S)).iteration_time_s;
  CHECK(all_reduce == Approx(2.0 * (p - 1) / p * S / B + 2 * (p - 1) * hop).epsilon(0.01));
  const double all_gather = simulator.run(lone_collective(OpKind::all_gather, p, S)).iteration_time_s;
  CHECK(all_gather == Approx(1.0 * (p - 1) / p * S / B + (p - 1) * hop).epsilon(0.01));
  const double reduce_scatter = simulator.run(lone_collective(OpKind::reduce_scatter, p, S)).iteration_time_s;
  CHECK(reduce_scatter == Approx(all_gather).epsilon(1e-9));
  // A pipelined chain: every link carries S once, after p−1 hops of latency.
  const double broadcast = simulator.run(lone_collective(OpKind::broadcast, p, S)).iteration_time_s;
  CHECK(broadcast == Approx(S / B + (p - 1) * hop).epsilon(0.01));
  // Each GPU sends p−1 pieces of S/p through its one NVLink port, after one hop.
  const double all_to_all = simulator.run(lone_collective(OpKind::all_to_all, p, S)).iteration_time_s;
  CHECK(all_to_all == Approx(1.0 * (p - 1) / p * S / B + hop).epsilon(0.01));
}

TEST_CASE("simulator: a lone collective on a preset takes NCCL's measured time, as the analytic model does",
          "[sim]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  sim::Simulator simulator(cluster);
  const costmodel::OpTimer timer(cluster, 8);
  for (double size : {1 * kKiB, 64 * kKiB, 1 * kMiB, 16 * kMiB, 1024 * kMiB}) {
    for (OpKind kind : {OpKind::all_reduce, OpKind::all_gather, OpKind::all_to_all, OpKind::broadcast}) {
      const std::vector<Program> programs = lone_collective(kind, 8, size);
      CAPTURE(size, to_string(kind));
      // Issued after the host's dispatch of it, then NCCL's time.
      const Op& op = programs[0].ops[0];
      CHECK(simulator.run(programs).iteration_time_s ==
            Approx(timer.dispatch_s(op) + timer.seconds(op)).epsilon(0.01));
    }
  }
  // The all-reduce is the measurement itself: 228.1 GB/s bus bandwidth at 1 GiB (dgx-a100's nccl-tests
  // curve, from the Azure AI-benchmarking-guide).
  CHECK(simulator.run(lone_collective(OpKind::all_reduce, 8, 1024 * kMiB)).iteration_time_s ==
        Approx(2.0 * 7 / 8 * 1024 * kMiB / 228.1e9).epsilon(0.01));
  // A small one is its latency-bound measurement: 40.25 us for 64 KiB over 8 A100 (nccl-tests, one
  // process per GPU, ABCI's job08.sh.7280517.nccl), where its flows alone take a few microseconds.
  const std::vector<Program> small = lone_collective(OpKind::all_reduce, 8, 64 * kKiB);
  CHECK(simulator.run(small).iteration_time_s ==
        Approx(timer.dispatch_s(small[0].ops[0]) + 40.25e-6).epsilon(1e-6));
}

TEST_CASE("simulator: two flows into one GPU share its link, each at half the bandwidth", "[sim]") {
  const double B = 100e9, S = 64 * kMiB;
  const hw::ClusterSpec cluster = flat_cluster(4, 1, B);
  const double hop = cluster.intra_node.hop_latency_s();
  sim::Simulator simulator(cluster);
  const std::vector<double> alone = simulator.transfer_s({{0, 2, S}});
  REQUIRE(alone[0] == Approx(S / B + hop).epsilon(1e-6));
  const std::vector<double> shared = simulator.transfer_s({{0, 2, S}, {1, 2, S}});
  CHECK(shared[0] == Approx(2 * S / B + hop).epsilon(1e-6));
  CHECK(shared[1] == Approx(2 * S / B + hop).epsilon(1e-6));
  // Split duplex: a flow the other way does not slow them down.
  const std::vector<double> opposite = simulator.transfer_s({{0, 2, S}, {2, 0, S}});
  CHECK(opposite[0] == Approx(S / B + hop).epsilon(1e-6));
  CHECK(opposite[1] == Approx(S / B + hop).epsilon(1e-6));
}

TEST_CASE("simulator: a pure-compute program takes the sum of its kernel times", "[sim]") {
  const hw::ClusterSpec cluster = flat_cluster(2);
  const costmodel::OpTimer timer(cluster, 2);
  std::vector<Program> programs(2);
  double expected = 0;
  for (Program& program : programs) {
    for (int i = 0; i < 5; ++i) {
      Op op;
      op.kind = i % 2 == 0 ? OpKind::gemm : OpKind::memory_bound;
      op.flops = 1e9 * (i + 1);
      op.memory_bytes = 1e8 * (i + 1);
      if (i > 0) op.deps = {static_cast<OpId>(i - 1)};
      program.ops.push_back(op);
    }
  }
  for (const Op& op : programs[0].ops) expected += timer.compute_s(op);
  sim::Simulator simulator(cluster);
  const sim::SimulationResult result = simulator.run(programs);
  CHECK(result.iteration_time_s == Approx(expected).epsilon(1e-9));
  CHECK(result.per_rank[0].compute_s == Approx(expected).epsilon(1e-9));
  CHECK(result.per_rank[1].exposed_comm_s == 0);
  CHECK(result.kernels == 10);
  CHECK(result.flows == 0);
}

TEST_CASE("simulator: communication behind compute is hidden, a wait on it is exposed", "[sim]") {
  const double B = 100e9, S = 100 * kMiB;
  const hw::ClusterSpec cluster = flat_cluster(2, 1, B);
  const costmodel::OpTimer timer(cluster, 2);
  std::vector<Program> programs = lone_collective(OpKind::all_gather, 2, S);
  Op kernel;
  kernel.kind = OpKind::memory_bound;
  kernel.memory_bytes = 1e8;  // 100 µs at 1 TB/s, the all-gather takes about 500 µs
  for (Program& program : programs) program.ops.insert(program.ops.begin() + 1, kernel);
  sim::Simulator simulator(cluster);
  const sim::SimulationResult result = simulator.run(programs);
  const double gather = timer.seconds(programs[0].ops[0]);
  CHECK(result.iteration_time_s == Approx(gather).epsilon(0.01));
  CHECK(result.per_rank[0].compute_s == Approx(timer.seconds(kernel)).epsilon(1e-9));
  CHECK(result.per_rank[0].exposed_comm_s == Approx(gather - timer.seconds(kernel)).epsilon(0.01));
  CHECK(result.per_rank[0].idle_s == Approx(0).margin(1e-9));
}

TEST_CASE("simulator: compute beside a collective runs at 1 − the fabric's contention, as priced", "[sim]") {
  const double B = 100e9, S = 100 * kMiB, share = 0.5;
  hw::ClusterSpec cluster = flat_cluster(2, 1, B);
  cluster.intra_node.compute_contention = share;
  const costmodel::OpTimer timer(cluster, 2);
  // The all-gather takes about 500 µs; a kernel of 100 µs runs wholly beside it, one of 1 ms outlasts it.
  const double bytes = GENERATE(1e8, 1e9);
  std::vector<Program> programs = lone_collective(OpKind::all_gather, 2, S);
  Op kernel;
  kernel.kind = OpKind::memory_bound;
  kernel.memory_bytes = bytes;
  for (Program& program : programs) program.ops.insert(program.ops.begin() + 1, kernel);
  sim::Simulator simulator(cluster);
  const sim::SimulationResult result = simulator.run(programs);
  const double gather = timer.seconds(programs[0].ops[0]), work = timer.seconds(kernel);
  const double kernel_s = work < gather * (1 - share) ? work / (1 - share) : work + share * gather;
  // The simulated gather is the analytic one within a percent (the test above).
  CHECK(result.per_rank[0].compute_s == Approx(kernel_s).epsilon(0.01));
  CHECK(result.iteration_time_s == Approx(std::max(gather, kernel_s)).epsilon(0.01));
  Program priced = programs[0];
  priced.phases = {{Phase::layer_forward, 0, 0, 0}};
  CHECK(costmodel::cost_phases(priced, timer)[0].cost.seconds ==
        Approx(result.iteration_time_s).epsilon(0.01));
}

TEST_CASE("simulator: kernels back to back beside a collective each end where the rate change puts them",
          "[sim]") {
  // Three kernels that nothing else waits for run as one event (the executor plans their ends at once);
  // the gather's end changes their rate in the middle of one of them. Work x done by time
  // f⁻¹(x): at 1 − share while the gather of G seconds runs, at full rate after it.
  const double B = 100e9, S = 100 * kMiB, share = 0.5;
  hw::ClusterSpec cluster = flat_cluster(2, 1, B);
  cluster.intra_node.compute_contention = share;
  const costmodel::OpTimer timer(cluster, 2);
  const double bytes = GENERATE(2e7, 1e8, 3e8);
  std::vector<Program> programs = lone_collective(OpKind::all_gather, 2, S);
  Op kernel;
  kernel.kind = OpKind::memory_bound;
  kernel.memory_bytes = bytes;
  for (Program& program : programs) program.ops.insert(program.ops.begin() + 1, 3, kernel);
  sim::SimulationOptions options;
  options.record_timeline = true;
  const sim::SimulationResult result = sim::Simulator(cluster, options).run(programs);
  const double gather = result.timeline[0].op_end_s[0], work = timer.seconds(kernel);
  CAPTURE(bytes, gather, work);
  REQUIRE(gather == Approx(timer.seconds(programs[0].ops[0])).epsilon(0.01));
  const auto done_by = [&](double x) {
    return x <= gather * (1 - share) ? x / (1 - share) : x + share * gather;
  };
  for (int k = 1; k <= 3; ++k) {
    CHECK(result.timeline[0].op_start_s[static_cast<std::size_t>(k)] ==
          Approx(done_by((k - 1) * work)).epsilon(1e-9));
    CHECK(result.timeline[0].op_end_s[static_cast<std::size_t>(k)] ==
          Approx(done_by(k * work)).epsilon(1e-9));
  }
  CHECK(result.per_rank[0].compute_s == Approx(done_by(3 * work)).epsilon(1e-9));
}

TEST_CASE("simulator: ranks that meet at a collective add the fabric's synchronization time, as priced",
          "[sim]") {
  const double B = 100e9, S = GENERATE(1 * kMiB, 100 * kMiB), synchronization_s = 1e-3;
  const OpKind kind = GENERATE(OpKind::all_gather, OpKind::all_reduce, OpKind::send_recv);
  CAPTURE(S, to_string(kind));
  const hw::ClusterSpec apart = flat_cluster(4, 1, B);
  hw::ClusterSpec meeting = apart;
  meeting.intra_node.synchronization_s = synchronization_s;
  const std::vector<Program> programs = lone_collective(kind, 4, S);
  const double unsynchronized = sim::Simulator(apart).run(programs).iteration_time_s;
  const double synchronized = sim::Simulator(meeting).run(programs).iteration_time_s;
  CHECK(synchronized - unsynchronized == Approx(synchronization_s).epsilon(1e-6));
  const costmodel::OpTimer timer(meeting, 4), unsynchronized_timer(apart, 4);
  const Op& op = programs[0].ops[0];
  CHECK(timer.seconds(op) - unsynchronized_timer.seconds(op) == Approx(synchronization_s).epsilon(1e-9));
  // A group of one rank has nobody to meet.
  Op alone = op;
  alone.group_size = 1;
  const costmodel::OpTimer one_rank(meeting, 1), one_rank_apart(apart, 1);
  CHECK(one_rank.seconds(alone) == one_rank_apart.seconds(alone));
}

TEST_CASE("simulator: a collective beyond the flow limit takes the analytic model's time", "[sim]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  sim::SimulationOptions options;
  options.max_flows_per_collective = 7;  // an 8-rank ring needs 8 flows
  sim::Simulator simulator(cluster, options);
  const std::vector<Program> programs = lone_collective(OpKind::all_reduce, 8, 64 * kMiB);
  const sim::SimulationResult result = simulator.run(programs);
  CHECK(result.flows == 0);
  CHECK(result.analytic_collectives == 1);
  const costmodel::OpTimer timer(cluster, 8);
  CHECK(result.iteration_time_s ==
        Approx(timer.dispatch_s(programs[0].ops[0]) + timer.seconds(programs[0].ops[0])).epsilon(1e-9));
  // A send/recv step needs one flow per rank, within the limit: still simulated.
  CHECK(simulator.run(lone_collective(OpKind::send_recv, 4, 64 * kMiB)).flows == 4);
  CHECK_THAT(sim::collective_algorithm_description(options), Catch::Contains("more than 7 flows"));
}
