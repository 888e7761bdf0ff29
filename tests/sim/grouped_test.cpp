// Groups of ranks in one simulated job (grouped_step.hpp): each group's collectives run on its own
// GPUs, matched among its own ranks, while the job's collectives gather every rank.
#include <catch2/catch.hpp>

#include "sim/simulator.hpp"
#include "strategies/library.hpp"
#include "tests/sim/sim_helpers.hpp"

using namespace paradyse;

namespace {

// Ranks [first, first + size) of the job run `count` all-gathers of `bytes` over their group, each
// waited for; then every rank of the job runs one all-gather of `bytes` over the job.
void add_group_collectives(std::vector<Program>& job, int first, int size, int count, double bytes) {
  for (int r = first; r < first + size; ++r) {
    Program& program = job[static_cast<std::size_t>(r)];
    for (int i = 0; i < count; ++i) {
      Op op;
      op.kind = OpKind::all_gather;
      op.stream = Stream::communication;
      op.size_bytes = bytes;
      op.bus_bytes = static_cast<double>(size - 1) / size * bytes;
      op.group_first = static_cast<int16_t>(first);
      op.group_size = static_cast<int16_t>(size);
      program.ops.push_back(op);
      Op wait;
      wait.kind = OpKind::wait;
      wait.deps = {static_cast<OpId>(program.ops.size() - 1)};
      program.ops.push_back(wait);
    }
  }
}

void add_job_collective(std::vector<Program>& job, double bytes) {
  const int p = static_cast<int>(job.size());
  for (Program& program : job) {
    Op op;
    op.kind = OpKind::all_gather;
    op.stream = Stream::communication;
    op.size_bytes = bytes;
    op.bus_bytes = static_cast<double>(p - 1) / p * bytes;
    op.group = CommGroup::job;
    op.group_size = static_cast<int16_t>(p);
    if (!program.ops.empty()) op.deps = {static_cast<OpId>(program.ops.size() - 1)};
    program.ops.push_back(op);
    Op wait;
    wait.kind = OpKind::wait;
    wait.deps = {static_cast<OpId>(program.ops.size() - 1)};
    program.ops.push_back(wait);
  }
}

std::vector<Program> empty_job(int p) {
  std::vector<Program> job(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    job[static_cast<std::size_t>(r)].rank = job[static_cast<std::size_t>(r)].job_rank = r;
    job[static_cast<std::size_t>(r)].degree = job[static_cast<std::size_t>(r)].job_degree = p;
  }
  return job;
}

}  // namespace

TEST_CASE("simulator: groups' collectives run at once on their own GPUs, the job's gather every rank",
          "[sim]") {
  const hw::ClusterSpec cluster = testing::flat_cluster(8);
  sim::Simulator simulator(ModelSpec{}, cluster);
  const double bytes = 64e6;
  const double group_of_4 =
      simulator.run(testing::lone_collective(OpKind::all_gather, 4, bytes)).iteration_time_s;
  const double job_of_8 =
      simulator.run(testing::lone_collective(OpKind::all_gather, 8, bytes)).iteration_time_s;
  REQUIRE(group_of_4 > 0);

  // Two groups of 4, each on its own GPUs and NVLink ports: neither slows the other. The first group
  // runs two collectives, the second one: each group counts its own, and the job's collective waits
  // for the slower group.
  std::vector<Program> job = empty_job(8);
  add_group_collectives(job, 0, 4, 2, bytes);
  add_group_collectives(job, 4, 4, 1, bytes);
  add_job_collective(job, bytes);
  const sim::SimulationResult grouped = simulator.run(std::move(job));
  CHECK(grouped.iteration_time_s == Approx(2 * group_of_4 + job_of_8).epsilon(1e-6));
}

TEST_CASE("simulator: a grouped step runs every group of a round at once", "[sim]") {
  const ModelSpec model = load_model("llama-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 2);
  sim::Simulator simulator(model, cluster);
  const auto group = [&](int first, int degree, const Strategy& strategy, int64_t tokens) {
    StepSpec micro;
    micro.model = &model;
    micro.tokens = tokens;
    micro.plan = uniform_plan(strategy, model.num_layers);
    return GroupWork{first, degree, micro};
  };
  GroupedStepSpec spec;
  spec.model = &model;
  spec.num_layers = static_cast<int>(model.num_layers);
  SECTION("two like groups of 4: every rank computes alike, and no group waits") {
    spec.rounds = {{group(0, 4, megatron_ts(), 16384), group(4, 4, megatron_ts(), 16384)}};
    const sim::SimulationResult r = simulator.simulate_grouped(spec);
    REQUIRE(r.per_rank.size() == 8);
    for (const sim::RankResult& rank : r.per_rank) {
      CHECK(rank.compute_s == Approx(r.per_rank[0].compute_s).epsilon(1e-9));
      CHECK(rank.peak_memory_bytes == Approx(r.per_rank[0].peak_memory_bytes).epsilon(1e-9));
    }
    CHECK_FALSE(r.oom);
  }
  SECTION("a long sequence on 8 GPUs and short ones on 4 and 2+2: each group computes its own") {
    spec.rounds = {{group(0, 8, ulysses_z(), 131072), group(8, 4, megatron_ts(), 8192),
                    group(12, 2, megatron_ts(), 4096), group(14, 2, ulysses_z(), 4096)}};
    const sim::SimulationResult r = simulator.simulate_grouped(spec);
    REQUIRE(r.per_rank.size() == 16);
    CHECK(r.per_rank[0].compute_s > 2 * r.per_rank[8].compute_s);
    CHECK(r.per_rank[0].peak_memory_bytes > r.per_rank[12].peak_memory_bytes);
    CHECK(r.per_rank[12].compute_s == Approx(r.per_rank[14].compute_s).epsilon(0.2));
  }
  SECTION("a group across nodes must fill whole nodes from a node's first GPU") {
    spec.rounds = {{group(0, 4, megatron_ts(), 8192), group(4, 8, megatron_ts(), 8192),
                    group(12, 4, megatron_ts(), 8192)}};
    CHECK_THROWS_WITH(simulator.simulate_grouped(spec), Catch::Contains("fill whole nodes"));
  }
}
