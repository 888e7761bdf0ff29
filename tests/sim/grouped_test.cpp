// Groups of ranks in one simulated job (grouped_step.hpp): each group's collectives run on its own
// GPUs, matched among its own ranks, while the job's collectives gather every rank.
#include <catch2/catch.hpp>

#include "costmodel/op_time.hpp"
#include "costmodel/program_cost.hpp"
#include "steps/estimate.hpp"
#include "steps/step_simulator.hpp"
#include "strategies/library.hpp"
#include "tests/sim/sim_helpers.hpp"

using namespace paradyse;

namespace {

// A collective of `kind` on `size_bytes` over `ranks`, after the program's last op, and a wait for it.
void add_waited(Program& program, OpKind kind, double size_bytes, CommGroup group, const RankSet& ranks) {
  const double ring = static_cast<double>(ranks.size - 1) / ranks.size;
  Op op;
  op.kind = kind;
  op.stream = Stream::communication;
  op.size_bytes = size_bytes;
  op.bus_bytes = (kind == OpKind::all_reduce ? 2 : 1) * ring * size_bytes;
  op.group = group;
  op.group_first = static_cast<int16_t>(ranks.first);
  op.group_size = static_cast<int16_t>(ranks.size);
  op.group_stride = static_cast<int16_t>(ranks.stride);
  if (!program.ops.empty()) op.deps = {static_cast<OpId>(program.ops.size() - 1)};
  program.ops.push_back(op);
  Op wait;
  wait.kind = OpKind::wait;
  wait.deps = {static_cast<OpId>(program.ops.size() - 1)};
  program.ops.push_back(wait);
}

// Ranks [first, first + size) of the job run `count` all-gathers of `bytes` over their group, each
// waited for.
void add_group_collectives(std::vector<Program>& job, int first, int size, int count, double bytes) {
  for (int r = first; r < first + size; ++r)
    for (int i = 0; i < count; ++i)
      add_waited(job[static_cast<std::size_t>(r)], OpKind::all_gather, bytes, CommGroup::parallel,
                 {first, size, 1});
}

// Every rank of the job runs one all-gather of `bytes` over the job.
void add_job_collective(std::vector<Program>& job, double bytes) {
  const int p = static_cast<int>(job.size());
  for (Program& program : job) add_waited(program, OpKind::all_gather, bytes, CommGroup::job, {0, p, 1});
}

// The ranks holding shard k of every shard group of `shard_degree` (hybrid sharding's replicas, one
// per node when a shard group is a node) all-reduce `bytes`, for each k of `shards`.
void add_replica_all_reduces(std::vector<Program>& job, int shard_degree, const std::vector<int>& shards,
                             double bytes) {
  const int replicas = static_cast<int>(job.size()) / shard_degree;
  for (const int k : shards)
    for (int i = 0; i < replicas; ++i)
      add_waited(job[static_cast<std::size_t>(k + i * shard_degree)], OpKind::all_reduce, bytes,
                 CommGroup::replica, {k, replicas, shard_degree});
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
  sim::Simulator simulator(cluster);
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
  steps::StepSimulator simulator(model, cluster);
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

TEST_CASE(
    "simulator: a shard's replicas, one per node, all-reduce through their own NICs, every shard's at once",
    "[sim]") {
  // Two nodes of 8 GPUs, 10 GB/s NICs, one per GPU. The replicas of shard k are GPUs k and 8 + k: a ring
  // of two that crosses one NIC each way, at one NIC's bandwidth (not the node's eight). The eight
  // shards' rings each keep to their own rail, so all of them take as long as one.
  const double nic = 10e9;
  const hw::ClusterSpec cluster = testing::flat_cluster(8, 2, 100e9, nic);
  sim::Simulator simulator(cluster);
  const double bytes = 1e9;  // bus bytes 2·(1/2)·bytes = bytes
  std::vector<Program> one = empty_job(16);
  add_replica_all_reduces(one, 8, {3}, bytes);
  const double alone = simulator.run(std::move(one)).iteration_time_s;
  CHECK(alone == Approx(bytes / nic).epsilon(1e-3));
  std::vector<Program> all = empty_job(16);
  add_replica_all_reduces(all, 8, {0, 1, 2, 3, 4, 5, 6, 7}, bytes);
  CHECK(simulator.run(std::move(all)).iteration_time_s == Approx(alone).epsilon(1e-6));
  // The analytic model prices the same ring at one NIC's bandwidth too.
  std::vector<Program> priced = empty_job(16);
  add_replica_all_reduces(priced, 8, {3}, bytes);
  CHECK(costmodel::OpTimer(cluster, 16).communication_s(priced[3].ops[0]) == Approx(alone).epsilon(1e-3));
}

TEST_CASE("simulator: a hybrid-sharded grouped step gathers inside each node and sums each shard across them",
          "[sim]") {
  const ModelSpec model = load_model("llama-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 2);
  steps::StepSimulator simulator(model, cluster);
  GroupedStepSpec spec;
  spec.model = &model;
  spec.num_layers = static_cast<int>(model.num_layers);
  for (const int first : {0, 8}) {
    StepSpec micro;
    micro.model = &model;
    micro.tokens = 16384;
    micro.plan = uniform_plan(megatron_ts(), model.num_layers);
    spec.rounds.push_back({});
    spec.rounds.front().push_back({first, 8, micro});
  }
  spec.rounds.resize(1);
  GroupedStepSpec hybrid = spec;
  hybrid.shard_degree = 8;

  // Every shard-group collective stays in the rank's node; the replicas' all-reduces cross nodes on
  // one GPU of each, once per layer and table gradient.
  const Program program = trace_grouped_step(hybrid, 11, 16);
  int shard_ops = 0, replica_ops = 0;
  for (const Op& op : program.ops) {
    if (op.group == CommGroup::shard) {
      ++shard_ops;
      CHECK((op.group_first == 8 && op.group_size == 8 && op.group_stride == 1));
    }
    if (op.group == CommGroup::replica) {
      ++replica_ops;
      CHECK((op.kind == OpKind::all_reduce && op.group_first == 3 && op.group_size == 2 &&
             op.group_stride == 8));
    }
  }
  CHECK(shard_ops > 0);
  CHECK(replica_ops == static_cast<int>(model.num_layers) + (model.tied_embeddings ? 1 : 2));

  const sim::SimulationResult full = simulator.simulate_grouped(spec);
  const sim::SimulationResult hsdp = simulator.simulate_grouped(hybrid);
  // Each GPU holds 1/8 of the model's state instead of 1/16.
  const double more_state = steps::static_memory_bytes(model, 8, WeightLayout::job) -
                            steps::static_memory_bytes(model, 16, WeightLayout::job);
  CHECK(hsdp.per_rank[0].peak_memory_bytes - full.per_rank[0].peak_memory_bytes ==
        Approx(more_state).epsilon(0.01));
  // The analytic model of the same programs agrees with the simulator.
  const costmodel::ProgramPrice priced =
      costmodel::price_program(trace_grouped_step(hybrid, 0, 16), costmodel::OpTimer(cluster, 16),
                               steps::static_memory_bytes(model, 8, WeightLayout::job), 0);
  CHECK(hsdp.iteration_time_s == Approx(priced.seconds).epsilon(0.05));
}

TEST_CASE(
    "simulator: under hybrid sharding a node without work in a round skips it, and the replicas sum "
    "their gradients once, in each node's last round",
    "[sim]") {
  const ModelSpec model = load_model("llama-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 2);
  const auto micro_batch = [&](int64_t tokens) {
    StepSpec micro;
    micro.model = &model;
    micro.tokens = tokens;
    micro.plan = uniform_plan(megatron_ts(), model.num_layers);
    return micro;
  };
  StepSpec idle;
  idle.model = &model;
  GroupedStepSpec spec;
  spec.model = &model;
  spec.num_layers = static_cast<int>(model.num_layers);
  spec.shard_degree = 8;
  // Both nodes train in the first round; only the first node in the second.
  spec.rounds = {{{0, 8, micro_batch(16384)}, {8, 8, micro_batch(16384)}},
                 {{0, 8, micro_batch(8192)}, {8, 8, idle}}};
  const auto count = [](const Program& program, CommGroup group, OpKind kind) {
    return std::count_if(program.ops.begin(), program.ops.end(),
                         [&](const Op& op) { return op.group == group && op.kind == kind; });
  };
  GroupedStepSpec one_round = spec;
  one_round.rounds.resize(1);
  const Program busy = trace_grouped_step(spec, 3, 16), skipping = trace_grouped_step(spec, 11, 16),
                alone = trace_grouped_step(one_round, 11, 16);
  // The second node gathers for the first round only; the first for both.
  const auto gathers = [&](const Program& p) { return count(p, CommGroup::shard, OpKind::all_gather); };
  CHECK(gathers(skipping) == gathers(alone));
  CHECK(gathers(busy) == 2 * gathers(alone));
  // One sum over the replicas per layer and table, whatever the rounds: on the first node under its
  // second round's backward (some of its gathers after the first sum), on the second after its one round
  // (none after).
  const auto sums = static_cast<long>(model.num_layers) + (model.tied_embeddings ? 1 : 2);
  CHECK(count(busy, CommGroup::replica, OpKind::all_reduce) == sums);
  CHECK(count(skipping, CommGroup::replica, OpKind::all_reduce) == sums);
  const auto gathers_around_first_sum = [](const Program& p) {
    std::pair<long, long> before_after{0, 0};
    bool summed = false;
    for (const Op& op : p.ops) {
      summed = summed || op.group == CommGroup::replica;
      if (op.group == CommGroup::shard && op.kind == OpKind::all_gather)
        ++(summed ? before_after.second : before_after.first);
    }
    return before_after;
  };
  CHECK(gathers_around_first_sum(busy).first > gathers(alone));
  CHECK(gathers_around_first_sum(busy).second > 0);
  CHECK(gathers_around_first_sum(skipping).second == 0);

  // The simulator runs the step (the replicas' sums meet though the nodes' last rounds differ) in the
  // time of the first node's programs, which the analytic model prices alone: the second node's sums,
  // waiting for the first's, hold back nothing of either.
  steps::StepSimulator simulator(model, cluster);
  const sim::SimulationResult simulated = simulator.simulate_grouped(spec);
  const double static_bytes = steps::static_memory_bytes(model, 8, WeightLayout::job);
  const costmodel::OpTimer timer(cluster, 16);
  const double first_node = costmodel::price_program(busy, timer, static_bytes, 0).seconds;
  const double second_node = costmodel::price_program(skipping, timer, static_bytes, 0).seconds;
  CHECK(second_node < 0.8 * first_node);
  CHECK(simulated.iteration_time_s == Approx(first_node).epsilon(0.05));
}
