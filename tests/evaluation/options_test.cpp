// The text forms users give (lengths, policies, exclusions, sweep specs): each value is read the same
// way wherever it is given, and each mistake is refused by name instead of run.
#include "evaluation/options.hpp"

#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "evaluation/sweep_spec.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;
using namespace paradyse::evaluation;

TEST_CASE("parse_length: K and M suffixes, and the 2^30-token limit", "[evaluation]") {
  CHECK(parse_length("4096", "--seq") == 4096);
  CHECK(parse_length("16K", "--seq") == 16384);
  CHECK(parse_length("1024M", "--max-len") == int64_t{1} << 30);
  CHECK(parse_lengths("1K,2k,1m", "--seq") == std::vector<int64_t>{1024, 2048, 1048576});
  CHECK_THROWS_WITH(parse_length("1025M", "--max-len"),
                    Catch::Contains("--max-len") && Catch::Contains("at most 2^30 = 1073741824 tokens"));
  CHECK_THROWS_WITH(parse_length("1099511627776", "--seq"), Catch::Contains("at most 2^30"));
  CHECK_THROWS_WITH(parse_length("99999999999999999999K", "--seq"), Catch::Contains("at most 2^30"));
  for (const char* bad : {"", "0", "-4", "4G", "1.5K", "K", "16 K"})
    CHECK_THROWS_WITH(parse_length(bad, "--seq"), Catch::Contains("expected a positive token count"));
}

TEST_CASE("parse_bytes: K, M and G as multiples of 1024, between the minimum and 1 TiB", "[evaluation]") {
  CHECK(parse_bytes("65536", "--max-bytes") == 65536);
  CHECK(parse_bytes("64K", "--max-bytes") == 65536);
  CHECK(parse_bytes("64m", "--max-bytes") == int64_t{64} << 20);
  CHECK(parse_bytes("1G", "--max-bytes", 1024) == int64_t{1} << 30);
  CHECK(parse_bytes("1024G", "--max-bytes") == int64_t{1} << 40);
  CHECK_THROWS_WITH(parse_bytes("1025G", "--max-bytes"), Catch::Contains("--max-bytes") &&
                                                             Catch::Contains("to 1 TiB") &&
                                                             Catch::Contains("'1025G'"));
  CHECK_THROWS_WITH(parse_bytes("512", "--max-bytes", 1024), Catch::Contains("from 1 KiB to 1 TiB"));
  CHECK_THROWS_WITH(parse_bytes("99999999999999999999", "--max-bytes"), Catch::Contains("to 1 TiB"));
  for (const char* bad : {"", "0", "-4K", "1.5M", "M", "16 M", "4T", "4MB"})
    CHECK_THROWS_WITH(parse_bytes(bad, "--max-bytes"), Catch::Contains("expected a size in bytes"));
}

TEST_CASE("PolicyOptions: a policy given twice and an --exclude of every strategy are refused",
          "[evaluation]") {
  MachineOptions machine;
  PolicyOptions twice;
  twice.policies = "paradyse,static:megatron_ts,paradyse";
  CHECK_THROWS_WITH(twice.build(machine), Catch::Contains("--policy") && Catch::Contains("'paradyse' twice"));
  PolicyOptions all_out;
  all_out.exclude = "megatron_ts,megatron_cz,ulysses_z,colossal_z,metp";
  CHECK_THROWS_WITH(all_out.build(machine), Catch::Contains("--exclude"));
  PolicyOptions one_left;
  one_left.exclude = "megatron_ts,megatron_cz,ulysses_z,colossal_z";
  CHECK(one_left.build(machine).policies.size() > 1);
}

TEST_CASE("PolicyOptions: 'all' beside other policies stands for the default ones", "[evaluation]") {
  MachineOptions machine;
  const auto names = [&](const std::string& policies) {
    PolicyOptions options;
    options.policies = policies;
    std::vector<std::string> out;
    for (const auto& policy : options.build(machine).policies) out.push_back(policy->name());
    return out;
  };
  std::vector<std::string> expected = names("all");
  expected.emplace_back("static:ulysses_z:offload");
  CHECK(names("all,static:ulysses_z:offload") == expected);
  CHECK(names("static:metp:offload,all").front() == "static:metp:offload");
  CHECK_THROWS_WITH(names("all,static:ulysses_z"), Catch::Contains("'static:ulysses_z' twice"));
  // gpt-8l: offloading the first 7 layers is every layer's but the last, 8 is more than there are.
  CHECK(names("static:ulysses_z:offload:7").size() == 1);
  CHECK_THROWS_WITH(names("static:ulysses_z:offload:8"),
                    Catch::Contains("expected to offload 1 to 7 of gpt-8l's 8"));
}

TEST_CASE("sweep spec: duplicate axis values and degree 0 are refused, plan lengths take suffixes",
          "[evaluation]") {
  testing::TempDir dir;
  const auto error = [&](const std::string& text) -> std::string {
    try {
      load_sweep_spec(dir.write("spec.toml", text));
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(error("[axes]\ndegree = [2, 4, 2]\n"),
             Catch::Contains("axes.degree[2]") && Catch::Contains("expected each value once"));
  CHECK_THAT(error("[axes]\nmodel = [\"gpt-8l\", \"gpt-8l\"]\n"), Catch::Contains("axes.model[1]"));
  CHECK_THAT(error("[axes]\ndegree = [0, 8]\n"), Catch::Contains("axes.degree[0]"));
  CHECK_THAT(error("[base]\nmode = \"plan\"\nplan_lengths = [\"16K\", \"2G\"]\n[axes]\ndegree = [8]\n"),
             Catch::Contains("base.plan_lengths[1]"));
  const SweepSpec spec = load_sweep_spec(dir.write("plan.toml",
                                                   "[base]\nmode = \"plan\"\nplan_lengths = [\"16K\", 4096]\n"
                                                   "[axes]\ndegree = [8]\n"));
  CHECK(spec.job(spec.points.at(0)).lengths == std::vector<int64_t>{4096, 16384});  // planned short to long
}

TEST_CASE("sweep spec: the global batch is a base key and an axis", "[evaluation]") {
  testing::TempDir dir;
  const SweepSpec spec =
      load_sweep_spec(dir.write("batch.toml", "[base]\nglobal_batch = 4\n[axes]\ndegree = [4, 8]\n"));
  CHECK(spec.job(spec.points.at(1)).global_batch == 4);
  const SweepSpec axis = load_sweep_spec(dir.write("axis.toml", "[axes]\nglobal_batch = [1, 16]\n"));
  REQUIRE(axis.points.size() == 2);
  CHECK(axis.job(axis.points.at(0)).global_batch == 1);
  CHECK(axis.job(axis.points.at(1)).global_batch == 16);
  CHECK_THROWS_WITH(load_sweep_spec(dir.write("bad.toml", "[axes]\nglobal_batch = [0]\n")),
                    Catch::Contains("axes.global_batch[0]") && Catch::Contains("a positive integer"));
}

TEST_CASE("sweep spec: packed training's budgets and the length cap, as base keys and axes", "[evaluation]") {
  testing::TempDir dir;
  const SweepSpec spec =
      load_sweep_spec(dir.write("packed.toml",
                                "[base]\nmax_len = \"1M\"\nover = \"split\"\nglobal_batch_tokens = 1048576\n"
                                "[axes]\nmicro_batch_tokens = [\"32K\", 65536]\n"));
  REQUIRE(spec.points.size() == 2);
  const CompareJob first = spec.job(spec.points.at(0)), second = spec.job(spec.points.at(1));
  CHECK(first.max_len == "1M");
  CHECK(first.over == "split");
  CHECK(first.global_batch_tokens == "1048576");
  CHECK(first.micro_batch_tokens == "32K");
  CHECK(second.micro_batch_tokens == "65536");
  CHECK_THROWS_WITH(load_sweep_spec(dir.write("bad.toml", "[axes]\nmicro_batch_tokens = [0]\n")),
                    Catch::Contains("axes.micro_batch_tokens[0]") && Catch::Contains("a length"));
}

TEST_CASE("sweep spec: group policies as a base key, their shard group as an axis", "[evaluation]") {
  testing::TempDir dir;
  const SweepSpec spec = load_sweep_spec(
      dir.write("groups.toml",
                "[base]\nglobal_batch_tokens = \"1M\"\nmicro_batch_tokens = \"64K\"\nmax_len = \"1M\"\n"
                "group_policies = \"flexsp,groups\"\n[axes]\nshard_group = [\"job\", \"node\"]\n"));
  REQUIRE(spec.points.size() == 2);
  CHECK(spec.job(spec.points.at(0)).group_policies == "flexsp,groups");
  CHECK(spec.job(spec.points.at(0)).shard_group == "job");
  CHECK(spec.job(spec.points.at(1)).shard_group == "node");
  CHECK_THROWS_WITH(load_sweep_spec(dir.write("bad.toml", "[axes]\nshard_group = [\"job\", \"rack\"]\n")),
                    Catch::Contains("point 'shard_group=rack'") &&
                        Catch::Contains("--shard-group: expected job or node, got 'rack'"));
  CHECK_THROWS_WITH(load_sweep_spec(dir.write(
                        "policies.toml", "[base]\ngroup_policies = \"flexsp,dp\"\n[axes]\nnodes = [1]\n")),
                    Catch::Contains("--group-policies") && Catch::Contains("dp"));
}

TEST_CASE("sweep spec: a JSON spec with a key twice is refused", "[evaluation]") {
  testing::TempDir dir;
  CHECK_THROWS_WITH(
      load_sweep_spec(dir.write("spec.json", R"({"axes": {"degree": [8]}, "axes": {"degree": [4]}})")),
      Catch::Contains("'axes'") && Catch::Contains("twice"));
}
