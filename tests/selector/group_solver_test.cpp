// The group solver (group_solver.hpp) on a hand-worked batch, its invariants on random batches, and
// against the exact MILP (group_milp.hpp) on small ones.
#include "selector/group_solver.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <set>

#include "common/errors.hpp"
#include "costmodel/program_cost.hpp"
#include "selector/group_costs.hpp"
#include "selector/group_milp.hpp"
#include "strategies/grouped_step.hpp"
#include "strategies/layer_flat_layout.hpp"
#include "strategies/library.hpp"
#include "strategies/model.hpp"

using namespace paradyse;
using selector::GroupProblem;

namespace {

constexpr double kNo = GroupProblem::kNoFit;

// Four short sequences and a long one on 4 ranks; times by degree 1, 2, 4.
GroupProblem hand_worked() {
  GroupProblem p;
  p.job = 4;
  p.degrees = {1, 2, 4};
  p.tokens = {1000, 1000, 1000, 1000, 64000};
  p.seconds = {{1, 0.6, 0.4}, {1, 0.6, 0.4}, {1, 0.6, 0.4}, {1, 0.6, 0.4}, {kNo, 4, 2.2}};
  p.capacity_tokens = {8000, 100000, 200000};
  return p;
}

// `sequences` random sequences on `job` ranks: times that fall with the degree, less than linearly
// (communication), and long sequences that fit only on larger groups.
// With `packed`, each micro-batch also pays a fixed cost, sequences pack only to half the capacity, and
// each round pays a fixed cost, of which a group's work hides part.
GroupProblem random_problem(std::mt19937& rng, int job, int sequences, bool packed = false) {
  GroupProblem p;
  p.job = job;
  for (int d = 1; d <= job; d *= 2) {
    p.degrees.push_back(d);
    p.capacity_tokens.push_back(int64_t{16384} * d);
    if (!packed) continue;
    p.packing_tokens.push_back(int64_t{8192} * d);
    p.micro_batch_s.push_back(2e-3 / d + 1e-4 * d);
    p.hidden_s.push_back(1e-3 + 2e-4 * d);
  }
  if (packed) p.round_s = 3e-3;
  std::lognormal_distribution<double> length(8.5, 1.4);
  for (int s = 0; s < sequences; ++s) {
    const auto tokens = std::max<int64_t>(64, static_cast<int64_t>(length(rng)));
    p.tokens.push_back(tokens);
    std::vector<double> row;
    for (std::size_t i = 0; i < p.degrees.size(); ++i) {
      const double d = p.degrees[i];
      const double work =
          1e-3 + 1e-7 * static_cast<double>(tokens) + 1e-12 * static_cast<double>(tokens * tokens);
      row.push_back(tokens > p.capacity_tokens[i]
                        ? kNo
                        : work / d + 2e-4 * (d - 1) * (1 + static_cast<double>(tokens) / 8192.0));
    }
    p.seconds.push_back(row);
  }
  return p;
}

// One round of a grouped step in which all `job` ranks train a sequence of `length` by `plan`, priced
// on rank 0 (as GroupCosts prices a micro-batch), with the gathers prefetched or not.
costmodel::ProgramPrice one_group_round(const ModelSpec& model, const hw::ClusterSpec& cluster, int job,
                                        const Plan& plan, int64_t length, bool prefetch,
                                        DType gradient_reduce_dtype = DType::bf16) {
  StepSpec micro;
  micro.model = &model;
  micro.tokens = SequenceLayout::padded_length(length, job, model.causal);
  micro.plan = plan;
  GroupedStepSpec step;
  step.model = &model;
  step.num_layers = static_cast<int>(model.num_layers);
  step.rounds = {{{0, job, micro}}};
  step.prefetch_gathers = prefetch;
  step.gradient_reduce_dtype = gradient_reduce_dtype;
  return costmodel::price_program(trace_grouped_step(step, 0, job), costmodel::OpTimer(cluster, job),
                                  steps::static_memory_bytes(model, job, WeightLayout::job),
                                  cluster.gpu.allocator_fragmentation);
}

// What the prefetch holds: one more layer's whole weights, with the allocator's fragmentation.
double prefetch_layer_bytes(const ModelSpec& model, const hw::ClusterSpec& cluster, int job) {
  return static_cast<double>(layer_flat_layout(model).padded(job)) * 2 *
         (1 + cluster.gpu.allocator_fragmentation);
}

}  // namespace

// Two ranks, one group size: sequences of one token each, `seconds` each; a round costs 0.5 s besides.
GroupProblem two_single_ranks(const std::vector<double>& seconds, int64_t micro_batch_tokens = 100) {
  GroupProblem p;
  p.job = 2;
  p.degrees = {1};
  p.capacity_tokens = {micro_batch_tokens};
  p.round_s = 0.5;
  for (const double s : seconds) {
    p.tokens.push_back(1);
    p.seconds.push_back({s});
  }
  return p;
}

selector::GroupInRound group_of(int rank, std::vector<std::size_t> sequences, double seconds) {
  return {rank, 1, std::move(sequences), seconds};
}

TEST_CASE("group solver's local search: a sequence leaves a round's slowest group for one with slack",
          "[selector]") {
  SECTION("within its round") {
    const GroupProblem problem = two_single_ranks({3, 1, 1});
    selector::GroupSchedule schedule;
    schedule.rounds = {{{group_of(0, {0, 1}, 4), group_of(1, {2}, 1)}, 4}};
    schedule.seconds = 4.5;
    selector::improve_schedule(problem, schedule);
    REQUIRE(schedule.rounds.size() == 1);
    CHECK(schedule.rounds[0].groups[0].sequences == std::vector<std::size_t>{0});
    CHECK(schedule.rounds[0].groups[1].sequences == std::vector<std::size_t>{2, 1});
    CHECK(schedule.seconds == Approx(3.5));
    CHECK(selector::schedule_seconds(problem, schedule) == Approx(3.5));
  }
  SECTION("into another round, which leaves its own round empty") {
    const GroupProblem problem = two_single_ranks({3, 2, 1});
    selector::GroupSchedule schedule;
    schedule.rounds = {{{group_of(0, {0}, 3), group_of(1, {1}, 2)}, 3}, {{group_of(0, {2}, 1)}, 1}};
    schedule.seconds = 5;
    selector::improve_schedule(problem, schedule);
    REQUIRE(schedule.rounds.size() == 1);
    CHECK(schedule.rounds[0].groups[1].sequences == std::vector<std::size_t>{1, 2});
    CHECK(schedule.seconds == Approx(3.5));
    CHECK(selector::schedule_seconds(problem, schedule) == Approx(3.5));
  }
  SECTION("only where the micro-batch has room for its tokens") {
    // Rank 1's micro-batch is full (2 of 2 tokens): the sequence goes to rank 0's, which is slower but
    // still shortens the step (4.5 s against 3.5 + 1.5).
    GroupProblem problem = two_single_ranks({3, 2, 1}, 2);
    problem.tokens = {1, 2, 1};
    selector::GroupSchedule schedule;
    schedule.rounds = {{{group_of(0, {0}, 3), group_of(1, {1}, 2)}, 3}, {{group_of(0, {2}, 1)}, 1}};
    schedule.seconds = 5;
    selector::improve_schedule(problem, schedule);
    REQUIRE(schedule.rounds.size() == 1);
    CHECK(schedule.rounds[0].groups[0].sequences == std::vector<std::size_t>{0, 2});
    CHECK(schedule.seconds == Approx(4.5));
    CHECK(selector::schedule_seconds(problem, schedule) == Approx(4.5));
  }
  SECTION("and never where no move shortens the step") {
    const GroupProblem problem = two_single_ranks({3, 3, 2, 2, 2});
    selector::GroupSchedule schedule;  // list scheduling's 7 s against the best 6: no single move helps
    schedule.rounds = {{{group_of(0, {0, 2, 4}, 7), group_of(1, {1, 3}, 5)}, 7}};
    schedule.seconds = 7.5;
    selector::improve_schedule(problem, schedule);
    CHECK(schedule.rounds[0].groups[0].sequences == std::vector<std::size_t>{0, 2, 4});
    CHECK(schedule.seconds == Approx(7.5));
  }
}

TEST_CASE("group solver's local search: on random schedules it keeps every rule and never lengthens a step",
          "[selector]") {
  std::mt19937 rng(23);
  int shortened = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int job = 1 << (trial % 4 + 1);
    const GroupProblem problem = random_problem(rng, job, 8 + trial, trial % 2 == 1);
    CAPTURE(trial, job);
    // A valid but poor schedule: every sequence alone in a round of its own, on its fastest degree.
    selector::GroupSchedule schedule;
    for (std::size_t s = 0; s < problem.tokens.size(); ++s) {
      std::size_t best = problem.degrees.size();
      for (std::size_t i = 0; i < problem.degrees.size(); ++i)
        if (std::isfinite(problem.seconds[s][i]) && problem.tokens[s] <= problem.capacity_tokens[i] &&
            (best == problem.degrees.size() || problem.seconds[s][i] < problem.seconds[s][best]))
          best = i;
      if (best == problem.degrees.size()) {
        schedule.unplaced.push_back(s);
        continue;
      }
      const double work = problem.micro_batch_fixed_s(best) + problem.seconds[s][best];
      schedule.rounds.push_back(
          {{{0, problem.degrees[best], {s}, work}}, problem.beyond_round_s(best, work)});
    }
    const double before = selector::schedule_seconds(problem, schedule);
    selector::improve_schedule(problem, schedule);
    const double after = selector::schedule_seconds(problem, schedule);  // throws if a rule is broken
    CHECK(after == Approx(schedule.seconds).epsilon(1e-12));
    CHECK(after <= before + 1e-12);
    if (trial % 2 == 1) shortened += after < before - 1e-9 ? 1 : 0;
  }
  // Where every round costs something besides its groups' work (the packed problems), a round of
  // one sequence pays that for little: moving it into another round's group with room saves it.
  CHECK(shortened == 20);
}

TEST_CASE("group solver: the long sequence on every rank, then the short ones one per rank", "[selector]") {
  const GroupProblem problem = hand_worked();
  // GPU-seconds: 1 for a short sequence alone (1.2 on 2, 1.6 on 4), 8 for the long one on 2; the
  // bound max(12 / 4, 2.2) = 3 moves the long one to 4 ranks (2.2 s); the short ones then fill a
  // round of their own side by side: 2.2 + 1 = 3.2 s, where stacking them would take longer.
  const selector::GroupSchedule greedy = selector::solve_groups_greedy(problem);
  REQUIRE(greedy.rounds.size() == 2);
  CHECK(greedy.rounds[0].groups.size() == 1);
  CHECK(greedy.rounds[0].groups[0].degree == 4);
  CHECK(greedy.rounds[0].groups[0].sequences == std::vector<std::size_t>{4});
  REQUIRE(greedy.rounds[1].groups.size() == 4);
  for (int r = 0; r < 4; ++r) {
    CHECK(greedy.rounds[1].groups[static_cast<std::size_t>(r)].first_rank == r);
    CHECK(greedy.rounds[1].groups[static_cast<std::size_t>(r)].degree == 1);
  }
  CHECK(greedy.seconds == Approx(3.2));
  CHECK(greedy.lower_bound_s == Approx(3.0));
  CHECK(selector::schedule_seconds(problem, greedy) == Approx(greedy.seconds));
  const selector::MilpSolution exact = selector::solve_groups_milp(problem, 3, 30);
  REQUIRE(exact.optimal);
  CHECK(exact.schedule.seconds == Approx(3.2));
  CHECK(selector::schedule_seconds(problem, exact.schedule) == Approx(3.2));
}

TEST_CASE("group solver: every sequence placed once, in aligned groups within capacity", "[selector]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const int job = trial % 2 == 0 ? 8 : 32;
    const GroupProblem problem = random_problem(rng, job, 10 + trial * 4, trial % 4 < 2);
    CAPTURE(trial, job);
    const selector::GroupSchedule greedy = selector::solve_groups_greedy(problem);
    CHECK(selector::schedule_seconds(problem, greedy) == Approx(greedy.seconds).epsilon(1e-12));
    CHECK(greedy.seconds >= greedy.lower_bound_s * (1 - 1e-12));
    for (const std::size_t s : greedy.unplaced)
      for (std::size_t i = 0; i < problem.degrees.size(); ++i)
        CHECK_FALSE(std::isfinite(problem.seconds[s][i]));
  }
}

TEST_CASE("group solver: never better than the exact MILP, and close to it on small batches", "[selector]") {
  std::mt19937 rng(17);
  double worst_gap = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const GroupProblem problem = random_problem(rng, 4, 6, trial % 2 == 1);
    CAPTURE(trial);
    const selector::GroupSchedule greedy = selector::solve_groups_greedy(problem);
    const selector::MilpSolution exact =
        selector::solve_groups_milp(problem, static_cast<int>(greedy.rounds.size()) + 1, 30);
    REQUIRE(exact.found);
    CHECK(selector::schedule_seconds(problem, exact.schedule) ==
          Approx(exact.schedule.seconds).epsilon(1e-9));
    if (!exact.optimal) continue;
    CHECK(greedy.seconds >= exact.schedule.seconds * (1 - 1e-6));
    worst_gap = std::max(worst_gap, greedy.seconds / exact.schedule.seconds - 1);
  }
  CHECK(worst_gap < 0.5);
}

TEST_CASE("group solver: a micro-batch pays its fixed cost once, however many sequences it packs",
          "[selector]") {
  // Two ranks, four equal sequences: 1 s each on one rank, 0.55 s on two, 0.5 s a micro-batch. Two
  // micro-batches of two side by side take 0.5 + 2 = 2.5 s; all four on both ranks 0.5 + 2.2 = 2.7 s;
  // four micro-batches of one would pay 0.5 four times.
  GroupProblem problem;
  problem.job = 2;
  problem.degrees = {1, 2};
  problem.tokens = {1000, 1000, 1000, 1000};
  problem.seconds.assign(4, {1, 0.55});
  problem.capacity_tokens = {10000, 10000};
  problem.micro_batch_s = {0.5, 0.5};
  selector::GroupSchedule pairs;
  pairs.rounds = {{{{0, 1, {0, 1}, 0}, {1, 1, {2, 3}, 0}}, 0}};
  CHECK(selector::schedule_seconds(problem, pairs) == Approx(2.5));
  selector::GroupSchedule singles;
  singles.rounds = {{{{0, 1, {0}, 0}, {1, 1, {1}, 0}}, 0}, {{{0, 1, {2}, 0}, {1, 1, {3}, 0}}, 0}};
  CHECK(selector::schedule_seconds(problem, singles) == Approx(3.0));
  const selector::GroupSchedule greedy = selector::solve_groups_greedy(problem);
  CHECK(greedy.seconds == Approx(2.5));
  CHECK(selector::schedule_seconds(problem, greedy) == Approx(2.5));
  const selector::MilpSolution exact = selector::solve_groups_milp(problem, 2, 30);
  REQUIRE(exact.optimal);
  CHECK(exact.schedule.seconds == Approx(2.5));
}

TEST_CASE(
    "group solver: a round takes its gathers, or its largest group's work beyond what that hides of them",
    "[selector]") {
  // Two ranks, three sequences of 0.5 s; a round's gathers take 1 s, of which a group's work hides
  // 0.8 s. One round, two on rank 0 and one on rank 1: 1 + max(0, 1 − 0.8) = 1.2 s. Two rounds take
  // at least 2 s, whatever their work.
  GroupProblem problem;
  problem.job = 2;
  problem.degrees = {1};
  problem.tokens = {1000, 1000, 1000};
  problem.seconds.assign(3, {0.5});
  problem.capacity_tokens = {10000};
  problem.round_s = 1;
  problem.hidden_s = {0.8};
  selector::GroupSchedule one_round;
  one_round.rounds = {{{{0, 1, {0, 2}, 0}, {1, 1, {1}, 0}}, 0}};
  CHECK(selector::schedule_seconds(problem, one_round) == Approx(1.2));
  selector::GroupSchedule two_rounds;
  two_rounds.rounds = {{{{0, 1, {0}, 0}, {1, 1, {1}, 0}}, 0}, {{{0, 1, {2}, 0}}, 0}};
  CHECK(selector::schedule_seconds(problem, two_rounds) == Approx(2.0));
  const selector::GroupSchedule greedy = selector::solve_groups_greedy(problem);
  CHECK(greedy.rounds.size() == 1);
  CHECK(greedy.seconds == Approx(1.2));
  // No schedule beats a round's gathers, nor the GPU-seconds (0.75 s a rank) beyond what they hide.
  CHECK(greedy.lower_bound_s == Approx(1.0));
  const selector::MilpSolution exact = selector::solve_groups_milp(problem, 2, 30);
  REQUIRE(exact.optimal);
  CHECK(exact.schedule.seconds == Approx(1.2));
  problem.hidden_s = {};  // nothing hidden: the one round takes 1 + 1 s
  CHECK(selector::solve_groups_greedy(problem).seconds == Approx(2.0));
}

TEST_CASE("group solver: beyond the packing limit a sequence is a micro-batch of its own", "[selector]") {
  // One rank: 3000 + 3000 tokens fit its capacity (10000) but not its packing limit (4000), and 6000
  // fits only alone; so three micro-batches, three rounds of 0.1 s each on top of the work.
  GroupProblem problem;
  problem.job = 1;
  problem.degrees = {1};
  problem.tokens = {3000, 3000, 6000};
  problem.seconds = {{1}, {1}, {2}};
  problem.capacity_tokens = {10000};
  problem.packing_tokens = {4000};
  problem.round_s = 0.1;
  const selector::GroupSchedule greedy = selector::solve_groups_greedy(problem);
  CHECK(greedy.rounds.size() == 3);
  CHECK(greedy.seconds == Approx(4.3));
  const selector::MilpSolution exact = selector::solve_groups_milp(problem, 3, 30);
  REQUIRE(exact.optimal);
  CHECK(exact.schedule.rounds.size() == 3);
  CHECK(exact.schedule.seconds == Approx(4.3));
  selector::GroupSchedule packed;
  packed.rounds = {{{{0, 1, {0, 1}, 0}}, 0}, {{{0, 1, {2}, 0}}, 0}};
  CHECK_THROWS_WITH(selector::schedule_seconds(problem, packed), Catch::Contains("packing limit"));
  problem.packing_tokens = {};  // without a limit, the two short ones share a micro-batch
  CHECK(selector::solve_groups_greedy(problem).seconds == Approx(4.2));
}

TEST_CASE("group solver: a sequence that would hold a round back goes to a wider group", "[selector]") {
  // Four ranks: a long sequence of 8 s on 2 ranks (4.4 s on 4) and four short ones of 2 s on 2 ranks
  // (1.2 s on 4), two to a micro-batch on 2 ranks, four on 4. Each is cheapest on 2 ranks, and the long
  // one there is within the step's bound (32 GPU-seconds over 4 ranks: 8 s), so on its cheapest degree it
  // fills a round alone: 8 + 4 s. Everything on 4 ranks takes 4.4 + 4.8 s. A step of two rounds has
  // rounds of about 4 s, which the long one outlasts on 2 ranks: on 4 it takes a round (4.4 s) and the
  // short ones the next on two groups of 2 (4 s): 8.4 s, the optimum.
  GroupProblem problem;
  problem.job = 4;
  problem.degrees = {2, 4};
  problem.tokens = {100, 10, 10, 10, 10};
  problem.seconds = {{8, 4.4}, {2, 1.2}, {2, 1.2}, {2, 1.2}, {2, 1.2}};
  problem.capacity_tokens = {100, 100};
  problem.packing_tokens = {20, 40};
  const selector::GroupSchedule greedy = selector::solve_groups_greedy(problem);
  CHECK(greedy.seconds == Approx(8.4));
  REQUIRE(greedy.rounds.size() == 2);
  CHECK(greedy.rounds[0].groups.size() == 1);
  CHECK(greedy.rounds[0].groups[0].degree == 4);
  const selector::MilpSolution exact = selector::solve_groups_milp(problem, 3, 30);
  REQUIRE(exact.optimal);
  CHECK(exact.schedule.seconds == Approx(8.4));
}

TEST_CASE(
    "group solver: under hybrid sharding each node keeps to its own rounds, and a wider group waits "
    "for the nodes it spans",
    "[selector]") {
  // Two nodes of 2 ranks; a round costs 0.1 s besides its work. Rounds: the first node trains A (5 s)
  // while the second trains B (1 s); the second then trains C (1 s) alone; then D (2 s) on all four.
  GroupProblem problem;
  problem.job = 4;
  problem.degrees = {2, 4};
  problem.tokens = {10, 10, 10, 10};
  problem.seconds = {{5, kNo}, {1, kNo}, {1, kNo}, {kNo, 2}};
  problem.capacity_tokens = {100, 100};
  problem.round_s = 0.1;
  selector::GroupSchedule schedule;
  schedule.rounds = {{{{0, 2, {0}, 0}, {2, 2, {1}, 0}}, 0}, {{{2, 2, {2}, 0}}, 0}, {{{0, 4, {3}, 0}}, 0}};
  // The job's rounds: 5.1 + 1.1 + 2.1 s. Nodes on their own: the first ends its round at 5.1 s, the
  // second its two at 2.2 s; D starts when both are ready.
  CHECK(selector::schedule_seconds(problem, schedule) == Approx(8.3));
  problem.shard_degree = 2;
  CHECK(selector::schedule_seconds(problem, schedule) == Approx(7.2));
  for (const double end : selector::shard_group_seconds(problem, schedule)) CHECK(end == Approx(7.2));
  schedule.rounds.pop_back();
  CHECK(selector::shard_group_seconds(problem, schedule)[0] == Approx(5.1));
  CHECK(selector::shard_group_seconds(problem, schedule)[1] == Approx(2.2));
}

TEST_CASE("group solver: under hybrid sharding the nodes balance their work over the step, not each round",
          "[selector]") {
  // Two nodes of 2 ranks. A long sequence of 6 s on a node's 2 ranks (5.5 s on all 4), six short ones
  // of 1 s on one rank, one to a micro-batch; a round costs 0.1 s besides. In the job's rounds the long
  // one holds the first round while two short ones run beside it, the other four take a round of their
  // own: 6 + 1 + 2 × 0.1 = 7.2 s at best (the MILP's optimum). A node keeping to its own rounds trains
  // the long one in one round (6.1 s) while the other trains the six short ones in three (3.3 s).
  GroupProblem problem;
  problem.job = 4;
  problem.degrees = {1, 2, 4};
  problem.tokens = {2000, 1000, 1000, 1000, 1000, 1000, 1000};
  problem.seconds = {{kNo, 6, 5.5}, {1, 0.6, 0.4}, {1, 0.6, 0.4}, {1, 0.6, 0.4},
                     {1, 0.6, 0.4}, {1, 0.6, 0.4}, {1, 0.6, 0.4}};
  problem.capacity_tokens = {1000, 2000, 2000};
  problem.packing_tokens = {1000, 1000, 1000};
  problem.round_s = 0.1;
  const selector::MilpSolution exact = selector::solve_groups_milp(problem, 4, 30);
  REQUIRE(exact.optimal);
  CHECK(exact.schedule.seconds == Approx(7.2));
  problem.shard_degree = 2;
  const selector::GroupSchedule hybrid = selector::solve_groups_greedy(problem);
  CHECK(hybrid.seconds == Approx(6.1));
  CHECK(selector::schedule_seconds(problem, hybrid) == Approx(6.1));
  const std::vector<double> ends = selector::shard_group_seconds(problem, hybrid);
  CHECK(std::min(ends[0], ends[1]) == Approx(3.3));
  CHECK(hybrid.lower_bound_s <= hybrid.seconds);
}

TEST_CASE("group solver: degrees, or a shard group, that do not divide the job are refused", "[selector]") {
  GroupProblem problem = hand_worked();
  problem.degrees = {1, 3, 4};
  CHECK_THROWS_WITH(selector::solve_groups_greedy(problem), Catch::Contains("powers of two that divide"));
  problem = hand_worked();
  problem.degrees = {1, 2, 8};
  CHECK_THROWS_AS(selector::solve_groups_greedy(problem), InputError);
  problem = hand_worked();
  problem.seconds.pop_back();
  CHECK_THROWS_WITH(selector::solve_groups_greedy(problem), Catch::Contains("a time per sequence"));
  problem = hand_worked();
  problem.shard_degree = 3;
  CHECK_THROWS_WITH(selector::solve_groups_greedy(problem), Catch::Contains("divides the job's 4, got 3"));
}

TEST_CASE("group costs: a job too small to hold the model's sharded state is refused, naming the sizes",
          "[selector]") {
  // llama3-70b-8l: about 9 B parameters in its 8 layers and tables, 18 bytes each: 160 GB on 1 GPU of 80.
  const ModelSpec model = load_model("llama3-70b-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  CHECK_THROWS_WITH(
      selector::GroupCosts(model, cluster, 1, "optimal", 1 << 20),
      Catch::Contains("sharded over 1 GPUs, more than the") && Catch::Contains("shard over more GPUs"));
  CHECK_NOTHROW(selector::GroupCosts(model, cluster, 8, "optimal", 1 << 14));
  CHECK_THROWS_WITH(selector::GroupCosts(model, cluster, 6, "optimal", 1 << 14),
                    Catch::Contains("power of two"));
}

TEST_CASE(
    "group costs: hybrid sharding holds a node's share of the state, and its shard group divides the job",
    "[selector]") {
  // Two nodes whose GPUs hold the state sharded over all 16 of them and 1 MiB more: sharded over one
  // node's 8 (each node a replica), a GPU holds twice that, and the job is refused.
  const ModelSpec model = load_model("llama-8l");
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 2);
  cluster.gpu.hbm_bytes =
      cluster.gpu.reserved_bytes + steps::static_memory_bytes(model, 16, WeightLayout::job) + 1024.0 * 1024.0;
  CHECK_NOTHROW(selector::check_group_job(model, cluster, 16));
  CHECK_THROWS_WITH(
      selector::check_group_job(model, cluster, 16, 8),
      Catch::Contains("sharded over 8 GPUs, more than the") && Catch::Contains("shard over the whole job"));
  CHECK_THROWS_WITH(selector::check_group_job(model, cluster, 16, 3),
                    Catch::Contains("a shard group of 3 GPUs does not divide the job's 16"));
}

TEST_CASE("group costs: group sizes that do not divide the job, or are not powers of two, are refused",
          "[selector]") {
  CHECK_NOTHROW(selector::check_group_degrees({1, 2, 8}, 8));
  CHECK_THROWS_WITH(selector::check_group_degrees({2, 3}, 8),
                    Catch::Contains("--group-sizes") &&
                        Catch::Contains("a group of 3 GPUs does not divide") && Catch::Contains("8 GPUs"));
  CHECK_THROWS_WITH(selector::check_group_degrees({16}, 8), Catch::Contains("does not divide"));
  CHECK_THROWS_WITH(selector::check_group_degrees({0}, 8), Catch::Contains("does not divide"));
  CHECK_THROWS_WITH(selector::check_group_degrees({6}, 12), Catch::Contains("not a power of two"));
  const ModelSpec model = load_model("llama-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const selector::GroupCosts costs(model, cluster, 8, selector::GroupCosts::kSwitching, 1 << 14,
                                   {.degrees = {2, 8}});
  CHECK(costs.degrees() == std::vector<int>{2, 8});
}

TEST_CASE("group costs: gradients reduced in fp32 are priced on the program that reduces them in fp32",
          "[selector]") {
  const ModelSpec model = load_model("llama-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const int job = 8;
  selector::GroupCosts bf16(model, cluster, job, selector::GroupCosts::kSwitching, 1 << 17, {.degrees = {8}});
  selector::GroupCosts fp32(model, cluster, job, selector::GroupCosts::kSwitching, 1 << 17,
                            {.degrees = {8}, .gradient_reduce_dtype = DType::fp32});
  CHECK(fp32.gradient_reduce_dtype() == DType::fp32);
  const int64_t length = 16384;
  const selector::GroupCosts::Price priced = fp32.price(MicroBatch::sequence(length), job);
  REQUIRE(priced.fits);
  const costmodel::ProgramPrice program =
      one_group_round(model, cluster, job, priced.plan, length, false, DType::fp32);
  CHECK(priced.seconds == Approx(program.seconds - program.optimizer_s).epsilon(1e-12));
  CHECK(priced.peak_bytes ==
        Approx(program.peak_bytes + prefetch_layer_bytes(model, cluster, job)).epsilon(1e-12));
  // Twice the bytes to reduce-scatter and to hold: a round costs more and holds fewer tokens.
  const selector::GroupProblem in_bf16 = bf16.problem({length});
  const selector::GroupProblem in_fp32 = fp32.problem({length});
  CHECK(in_fp32.round_s > in_bf16.round_s);
  CHECK(in_fp32.capacity_tokens[0] <= in_bf16.capacity_tokens[0]);
}

TEST_CASE("group costs: switching mixes a faster strategy into a leaner one where the faster does not fit",
          "[selector]") {
  // gpt-8l on 8 GPUs: past Ulysses' capacity, as many Ulysses (or other fast) layers as fit beside
  // METP's. Each priced plan beats every uniform plan that fits, priced on its own.
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const int job = 8;
  selector::GroupCosts costs(model, cluster, job, selector::GroupCosts::kSwitching, 1 << 19,
                             {.degrees = {8}});
  const double prefetch_bytes = prefetch_layer_bytes(model, cluster, job);
  int mixed = 0;
  for (const int64_t length : {16384, 110000, 200000}) {
    CAPTURE(length);
    const selector::GroupCosts::Price chosen = costs.price(MicroBatch::sequence(length), job);
    REQUIRE(chosen.fits);
    CHECK(chosen.peak_bytes <= cluster.tensor_capacity_bytes());
    std::set<std::string> strategies;
    for (const LayerChoice& layer : chosen.plan) strategies.insert(std::string(layer.strategy->name()));
    mixed += strategies.size() > 1 ? 1 : 0;
    for (const Strategy* strategy : paper_strategies()) {
      // Priced without the prefetch, held with one more gathered layer (group_costs.hpp).
      const costmodel::ProgramPrice uniform =
          one_group_round(model, cluster, job, uniform_plan(*strategy, model.num_layers), length, false);
      if (uniform.peak_bytes + prefetch_bytes > cluster.tensor_capacity_bytes()) continue;
      CAPTURE(strategy->name());
      CHECK(chosen.seconds <= (uniform.seconds - uniform.optimizer_s) * (1 + 1e-9));
    }
  }
  CHECK(mixed >= 1);
}

TEST_CASE(
    "group costs: a round goes without the prefetch where only that lets a faster plan fit, and only "
    "when that pays",
    "[selector]") {
  // gpt-8l on 8 GPUs (a layer's whole weights are 3.6 GB): at each strategy's longest length a uniform
  // plan fits only without the prefetch's one more layer. The price chooses it there exactly when it is
  // faster than the fastest plan that fits with the prefetch by more than the prefetch hides under that.
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const int job = 8;
  selector::GroupCosts costs(model, cluster, job, selector::GroupCosts::kSwitching, 1 << 19,
                             {.degrees = {8}});
  const double prefetch_bytes = prefetch_layer_bytes(model, cluster, job);
  const double capacity = cluster.tensor_capacity_bytes();
  const auto round = [&](const Plan& plan, int64_t length, bool prefetch) {
    return one_group_round(model, cluster, job, plan, length, prefetch);
  };
  int relieved = 0;
  for (const Strategy* strategy : paper_strategies()) {
    if (strategy->unsupported(model, job)) continue;
    const Plan plan = uniform_plan(*strategy, model.num_layers);
    // The longest length (in steps of 1K) at which the plan fits without the prefetch's layer.
    int64_t fits = 0, unfit = 1 << 10;  // in units of 1K tokens
    while (unfit - fits > 1) {
      const int64_t mid = (fits + unfit) / 2;
      (round(plan, mid * 1024, false).peak_bytes <= capacity ? fits : unfit) = mid;
    }
    // From 64K tokens on every layer computes longer than its gather, so the prefetch hides the same
    // gathers under every plan (colossal_z, which scores all pairs, fits only 8K).
    if (fits < 64) continue;
    const int64_t length = fits * 1024;
    if (round(plan, length, false).peak_bytes + prefetch_bytes <= capacity) continue;
    CAPTURE(strategy->name(), length);
    const selector::GroupCosts::Price chosen = costs.price(MicroBatch::sequence(length), job);
    REQUIRE(chosen.fits);
    const costmodel::ProgramPrice chosen_off = round(chosen.plan, length, false);
    // peak_bytes is what the round holds: with the prefetch's layer, or without it.
    CHECK(chosen.peak_bytes ==
          Approx(chosen_off.peak_bytes + (chosen.prefetch ? prefetch_bytes : 0)).epsilon(1e-9));
    CHECK(chosen.peak_bytes <= capacity);
    const double chosen_s = chosen_off.seconds - chosen_off.optimizer_s;
    const costmodel::ProgramPrice chosen_on = round(chosen.plan, length, true);
    const double chosen_hidden_s = chosen_s - (chosen_on.seconds - chosen_on.optimizer_s);
    // Against every uniform plan: one that fits with the prefetch is no faster once the prefetch is
    // counted; one that fits only without it gains less than the prefetch hides, unless chosen.
    for (const Strategy* other : paper_strategies()) {
      if (other->unsupported(model, job)) continue;
      const costmodel::ProgramPrice off = round(uniform_plan(*other, model.num_layers), length, false);
      if (off.peak_bytes > capacity) continue;
      CAPTURE(other->name());
      const double other_s = off.seconds - off.optimizer_s;
      if (off.peak_bytes + prefetch_bytes <= capacity) {
        const costmodel::ProgramPrice on = round(uniform_plan(*other, model.num_layers), length, true);
        const double other_hidden_s = other_s - (on.seconds - on.optimizer_s);
        CHECK(chosen_s - (chosen.prefetch ? chosen_hidden_s : 0) <= (other_s - other_hidden_s) * (1 + 1e-3));
      } else if (chosen.prefetch) {
        CHECK(other_s >= (chosen_s - chosen_hidden_s) * (1 - 1e-3));
      }
    }
    relieved += chosen.prefetch ? 0 : 1;
  }
  CHECK(relieved >= 1);

  // Never for a group smaller than the job: its round's other groups would lose their hidden gathers
  // too. The same group of 8 in a job of 16 keeps the prefetch at every length it trains.
  selector::GroupCosts halves(model, hw::load_cluster("dgx-a100", 2), 2 * job,
                              selector::GroupCosts::kSwitching, 1 << 19, {.degrees = {8}});
  for (int64_t length = 64 * 1024; length <= 256 * 1024; length += 8 * 1024) {
    const selector::GroupCosts::Price chosen = halves.price(MicroBatch::sequence(length), job);
    CAPTURE(length);
    CHECK((chosen.prefetch || !chosen.fits));
  }
}

TEST_CASE("group costs: sequences pack up to what the plan of a micro-batch at the limit holds",
          "[selector]") {
  // gpt-8l on 16 GPUs: a micro-batch of a few tokens runs tensor parallelism fastest, which holds fewer
  // tokens than Ulysses, the fastest plan for hundreds of thousands. The packing limit is the length
  // that its own plan holds with the prefetch's layer, and the tiny micro-batch's plan does not.
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 2);
  const int job = 16;
  selector::GroupCosts costs(model, cluster, job, selector::GroupCosts::kSwitching, 1 << 20,
                             {.degrees = {job}});
  const int64_t limit = costs.problem({64}).packing_tokens.at(0);
  const double capacity = cluster.tensor_capacity_bytes();
  const double prefetch_bytes = prefetch_layer_bytes(model, cluster, job);
  const auto holds = [&](const Plan& plan, int64_t length) {
    return one_group_round(model, cluster, job, plan, length, false).peak_bytes + prefetch_bytes <= capacity;
  };
  const Plan at_limit = costs.price(MicroBatch::sequence(limit), job).plan;
  CAPTURE(limit, plan_runs_name(at_limit));
  CHECK(holds(at_limit, limit));
  CHECK_FALSE(holds(at_limit, limit + limit / 10));
  const Plan tiny = costs.price(MicroBatch::sequence(64), job).plan;
  CHECK(tiny != at_limit);
  CHECK_FALSE(holds(tiny, limit));
}

TEST_CASE(
    "group costs: with a host link, offloading activations lets a fast plan run where only slower ones "
    "fit otherwise",
    "[selector]") {
  // gpt-8l on 8 GPUs at 160K tokens: Ulysses keeping every layer's activations needs about twice the
  // GPU's memory; with recomputation choices the leaner plans recompute or run METP layers. Offloaded
  // activations cost no compute where the host link keeps up with the layers.
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  hw::ClusterSpec without_link = cluster;
  without_link.gpu.host_link_bytes_per_second = without_link.gpu.host_memory_bytes = 0;
  const int job = 8;
  const MicroBatch sequence = MicroBatch::sequence(160 * 1024);
  selector::GroupCosts with(model, cluster, job, selector::GroupCosts::kSwitching, 1 << 19,
                            {.recompute_choices = true, .degrees = {8}});
  selector::GroupCosts without(model, without_link, job, selector::GroupCosts::kSwitching, 1 << 19,
                               {.recompute_choices = true, .degrees = {8}});
  const selector::GroupCosts::Price offloading = with.price(sequence, job);
  const selector::GroupCosts::Price recomputing = without.price(sequence, job);
  REQUIRE(offloading.fits);
  REQUIRE(recomputing.fits);
  CAPTURE(plan_name(offloading.plan), plan_name(recomputing.plan));
  CHECK(std::any_of(offloading.plan.begin(), offloading.plan.end(),
                    [](const LayerChoice& layer) { return layer.recompute == Recompute::offload; }));
  CHECK(std::none_of(recomputing.plan.begin(), recomputing.plan.end(),
                     [](const LayerChoice& layer) { return layer.recompute == Recompute::offload; }));
  CHECK(offloading.seconds < recomputing.seconds);
  CHECK(offloading.peak_bytes <= cluster.tensor_capacity_bytes());
}
