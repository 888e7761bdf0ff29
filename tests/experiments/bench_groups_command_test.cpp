// `paradyse bench-groups`: the greedy never beats the proven optimum it is compared with, its solve
// time is printed (the target is the benchmark's to show, not a test's), and bad job sizes are refused.
#include <catch2/catch.hpp>

#include <regex>

#include "tests/experiments/run_paradyse.hpp"

using namespace paradyse::testing;

TEST_CASE("bench-groups: the greedy is at or above the MILP's proven optimum, and its solve time is printed",
          "[experiments]") {
  // Weights sharded over each job, or over each node (hybrid sharding: the 16 simulated GPUs are two).
  const std::string shard_group = GENERATE("job", "node");
  const RunResult r = run_paradyse(
      "bench-groups --model llama-8l --instances 2 --sequences 5 --steps 1 --batch-tokens 128K "
      "--simulate-gpus 16 --shard-group " +
      shard_group);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(shard_group == "node" ? "weights sharded over each node (hybrid sharding)"
                                                          : "weights sharded over the job"));
  std::smatch gap;
  REQUIRE(std::regex_search(
      r.out, gap,
      std::regex(R"(median ([+-][0-9.]+) %, p99 ([+-][0-9.]+) %, max ([+-][0-9.]+) % \((\d+) proven)")));
  CHECK(std::stod(gap[1]) >= 0);  // the MILP's optimum is a lower bound on the greedy's objective
  CHECK(std::stod(gap[3]) >= std::stod(gap[1]));
  CHECK(std::stoi(gap[4]) >= 1);
  CHECK(std::regex_search(r.out, std::regex(R"(greedy solve: median [0-9.]+ ms, p99 [0-9.]+ ms)")));
  std::smatch step;
  REQUIRE(
      std::regex_search(r.out, step,
                        std::regex(R"((\d+) events: (\d+) kernels, (\d+) flows, (\d+) collectives timed )"
                                   R"(analytically\): [0-9.]+ s to trace and simulate, [0-9.]+ s simulated; )"
                                   R"(maximum resident memory of the whole run (\d+) MiB)")));
  CHECK(std::stoll(step[1]) == std::stoll(step[2]) + std::stoll(step[3]) + std::stoll(step[4]));
  CHECK(std::stoll(step[3]) > 0);  // 16 GPUs: every collective within the flow bound
  CHECK(std::stoll(step[5]) > 0);
}

TEST_CASE("bench-groups --max-flows-per-collective 0: the step's collectives are all timed analytically",
          "[experiments]") {
  const RunResult r = run_paradyse(
      "bench-groups --model llama-8l --instances 1 --sequences 5 --steps 1 --batch-tokens 128K "
      "--simulate-gpus 16 --shard-group node --max-flows-per-collective 0");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::smatch step;
  REQUIRE(std::regex_search(r.out, step, std::regex(R"((\d+) kernels, 0 flows, (\d+) collectives timed)")));
  CHECK(std::stoll(step[2]) > 0);
}

TEST_CASE("bench-groups: a job that is not a power of two, or an unknown shard group, is refused",
          "[experiments]") {
  const RunResult r = run_paradyse("bench-groups --small-gpus 6 --instances 1 --steps 1");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("power of two"));
  CHECK(r.out.empty());
  const RunResult rack = run_paradyse("bench-groups --shard-group rack --instances 1 --steps 1");
  CHECK(rack.exit_code == 2);
  CHECK_THAT(rack.err, Catch::Contains("--shard-group: expected job or node, got 'rack'"));
  CHECK(rack.out.empty());
}
