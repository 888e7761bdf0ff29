#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "tests/experiments/run_paradyse.hpp"
#include "tests/experiments/run_paradyse_json.hpp"

using namespace paradyse::testing;

TEST_CASE("plan --json prints the documented keys", "[experiments]") {
  const RunResult r = run_paradyse("plan --policy paradyse --seq 256K --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("policy") == "paradyse");
  CHECK(j.at("seq") == 262144);
  REQUIRE(j.at("plan").size() == 8);  // one strategy per layer of gpt-8l
  CHECK(j.at("predicted_time_s").get<double>() > 0);
  CHECK(j.at("predicted_peak_bytes").get<double>() > 0);
  CHECK(j.at("fits") == true);
  // megatron_ts does not fit at 256K, metp does: the plan must mix or go lean.
  const auto& plan = j.at("plan");
  CHECK(std::count(plan.begin(), plan.end(), "metp") > 0);
  CHECK(j.at("switches").get<int>() >= 0);
}

TEST_CASE("plan --longest: paradyse and optimal reach at least the longest static strategy",
          "[experiments]") {
  const RunResult r = run_paradyse("plan --longest --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  int64_t best_static = 0, paradyse = -1, optimal = -1;
  for (const auto& row : j) {
    const std::string policy = row.at("policy");
    const int64_t longest = row.at("longest_seq");
    if (policy.starts_with("static:")) best_static = std::max(best_static, longest);
    if (policy == "paradyse") paradyse = longest;
    if (policy == "optimal") optimal = longest;
  }
  CHECK(best_static > 100000);  // metp: the lean strategy trains the longest sequences
  CHECK(paradyse >= best_static);
  CHECK(optimal >= best_static);
  const RunResult table = run_paradyse("plan --longest");
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.out, Catch::Contains("static:metp") && Catch::Contains("optimal"));
}

TEST_CASE("plan: a sequence of lengths keeps a nearby plan (smoothing), and the ablation flags work",
          "[experiments]") {
  const RunResult smooth = run_paradyse("plan --policy paradyse --seq 128K,120K --json");
  REQUIRE(smooth.exit_code == 0);
  const auto j = nlohmann::json::parse(smooth.out);
  REQUIRE(j.size() == 2);
  const RunResult plain = run_paradyse("plan --policy paradyse --seq 120K --json --gamma 0");
  REQUIRE(plain.exit_code == 0);
  const auto alone = nlohmann::json::parse(plain.out);
  // Whatever smoothing kept is within 5 % of the best plan decided alone.
  CHECK(j[1].at("predicted_time_s").get<double>() <= 1.05 * alone.at("predicted_time_s").get<double>());
  for (const char* flag : {"--no-pruning", "--no-early-termination", "--no-mixes", "--no-short-circuit",
                           "--no-cache", "--no-fallback", "--exclude metp"}) {
    INFO(flag);
    CHECK(run_paradyse(std::string("plan --policy paradyse --seq 64K ") + flag).exit_code == 0);
  }
}

TEST_CASE("plan --docs: a packed micro-batch is planned as its documents cost, not as one sequence",
          "[experiments]") {
  // The same 120K tokens as documents of 60K, 40K and 20K: attention only within each, so less time;
  // the flash kernel keeps no scores, so memory is that of the tokens either way.
  const auto p = run_paradyse_json("plan --policy static:megatron_ts --docs 60K,40K,20K --json");
  CHECK(p.at("seq") == 122880);
  const auto o = run_paradyse_json("plan --policy static:megatron_ts --seq 120K --json");
  CHECK(p.at("predicted_time_s").get<double>() < o.at("predicted_time_s").get<double>());
  CHECK(p.at("predicted_peak_bytes").get<double>() == o.at("predicted_peak_bytes").get<double>());
}

TEST_CASE("plan: bad inputs fail with a clear message and no output", "[experiments]") {
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"plan --policy nosuch --seq 4K",
       "expected static:NAME[:selective|:full|:offload], paradyse, optimal, paradyse-2d or optimal-2d, got "
       "'nosuch'"},
      {"plan --policy static:nosuch --seq 4K", "unknown strategy 'nosuch'"},
      {"plan --policy paradyse --seq 4K --gamma 1", "--gamma: expected a fraction in [0, 1), got 1"},
      {"plan --policy paradyse --seq 4K --gamma -0.1", "expected a fraction in [0, 1)"},
      {"plan --policy paradyse --seq 4K --exclude nosuch", "unknown strategy 'nosuch'"},
      {"plan --policy static:ulysses_z --seq 4K --degree 5", "cannot run gpt-8l at degree 5"},
      {"plan --policy paradyse", "expected one of --seq LENGTHS, --docs DOCUMENTS or --longest"},
      {"plan --policy paradyse --seq 4K --docs 2K,2K", "expected one of --seq LENGTHS, --docs DOCUMENTS"},
      {"plan --policy paradyse --docs 2K,0", "--docs: expected a positive token count"},
      {"plan --policy paradyse --seq 4K --costmodel no/such/file.json", "no/such/file.json"},
      {"plan --policy paradyse --seq 4K --costmodel tests/experiments/data/malformed.json", "malformed.json"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const RunResult r = run_paradyse(c.args);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK(r.out.empty());
  }
}
