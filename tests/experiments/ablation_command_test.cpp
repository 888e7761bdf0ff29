#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/experiments/run_paradyse.hpp"

using namespace paradyse::testing;

TEST_CASE("ablation runs the paper's Table 5 set against the full policy", "[experiments]") {
  const auto dir = temp_dir();
  const RunResult r =
      run_paradyse("ablation --limit 400 --engine analytic --json --out " + (dir / "run").string());
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  std::vector<std::string> names;
  for (const auto& row : j.at("variants")) names.push_back(row.at("variant"));
  const std::vector<std::string> expected{
      "full",           "w/o megatron_ts", "w/o megatron_cz",        "w/o ulysses_z",
      "w/o colossal_z", "w/o metp",        "w/o learned cost model", "w/o smoothing"};
  CHECK(names == expected);
  const double full = j.at("variants")[0].at("total_time_s");
  CHECK(full > 0);
  for (const auto& row : j.at("variants")) {
    CAPTURE(row.at("variant"));
    const double total = row.at("total_time_s");
    CHECK(row.at("relative_to_full_pct").get<double>() == Approx(100 * (total / full - 1)).margin(1e-9));
    CHECK(row.at("trained").get<int>() + row.at("oom_count").get<int>() == 400);
  }
  // The first 400 files are short: without megatron_ts every step pays ZeRO-3's weight traffic.
  CHECK(j.at("variants")[1].at("relative_to_full_pct").get<double>() > 50);
  for (const char* file : {"ablation.json", "ablation.md", "profile.csv", "costmodel.json"})
    CHECK(std::filesystem::exists(dir / "run" / file));
  std::filesystem::remove_all(dir);
}
