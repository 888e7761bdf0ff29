#include <catch2/catch.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "evaluation/published_runs.hpp"
#include "tests/experiments/run_paradyse.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse::testing;

TEST_CASE("published: every bundled run with its error, the mean and max, and each source's agreement",
          "[experiments]") {
  // The errors are printed for a reader, not asserted: they are the model's, against reality.
  const RunResult table = run_paradyse("published");
  INFO(table.err);
  REQUIRE(table.exit_code == 0);
  std::cout << table.out;
  const std::vector<paradyse::evaluation::PublishedRun> runs = paradyse::evaluation::bundled_published_runs();
  for (const auto& run : runs) CHECK_THAT(table.out, Catch::Contains(run.name));
  CHECK_THAT(table.out, Catch::Contains("mean |error|") && Catch::Contains("Spearman"));

  const RunResult json = run_paradyse("published --json");
  REQUIRE(json.exit_code == 0);
  const auto j = nlohmann::json::parse(json.out);
  REQUIRE(j.at("runs").size() == runs.size());
  for (const auto& row : j.at("runs")) {
    CHECK(row.at("predicted_s").get<double>() > 0);
    CHECK(row.at("fits").is_boolean());
    CHECK(row.at("host_bound_share").get<double>() >= 0);
    if (row.at("source").get<std::string>().starts_with("Korthikanti")) {
      // Korthikanti's runs name the framework that issued them; their 22B layers keep the GPU busy.
      CHECK(row.at("framework") == "megatron-lm");
      CHECK(row.at("host_bound_share").get<double>() < 0.05);
    } else {
      CHECK(row.at("data_parallel").get<int>() >=
            8);  // llm-foundry's and torchtitan's FSDP over 8 to 512 GPUs
    }
  }
  CHECK(j.at("max_abs_error_pct").get<double>() >= j.at("mean_abs_error_pct").get<double>());
  CHECK(j.at("agreement_by_source").size() == 6);
  for (const auto& source : j.at("agreement_by_source"))
    CHECK(source.at("mean_abs_error_pct").get<double>() > 0);
  // The sources' rows paradyse cannot express are listed with the reason, in both forms.
  REQUIRE(j.at("unexpressed").size() == 4);
  CHECK_THAT(j.at("unexpressed")[1].at("reason").get<std::string>(), Catch::Contains("FP8"));
  CHECK_THAT(j.at("unexpressed")[3].at("reason").get<std::string>(), Catch::Contains("recompute modes"));
  CHECK_THAT(table.out, Catch::Contains("not expressed, from MosaicML llm-foundry") &&
                            Catch::Contains("not expressed, from torchtitan"));
}

TEST_CASE("published --table: a user's table with a mistake is refused, naming the file and field",
          "[experiments]") {
  const TempDir dir;
  const std::string path = dir.file("mine.json");
  std::ofstream(path)
      << R"({"source": "my cluster", "runs": [{"name": "a", "table": "-", "cluster": "dgx-h100",
    "model": "llama3-8b", "strategy": "ulysses_z", "degree": 8, "seq": 8192, "measure": "iteration",
    "measured_s": "fast"}]})";
  const RunResult r = run_paradyse("published --table " + path);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Contains(path) && Catch::Contains("runs[0].measured_s"));
}

TEST_CASE(
    "published --table: the steps measured on one H200 and on one H100 load, each priced on its model file",
    "[experiments]") {
  // Like the bundled tables, printed for a reader, not asserted as timing.
  const std::string path = GENERATE(as<std::string>{}, "tools/measure/h200-2026-11-26/measured-steps.json",
                                    "tools/measure/h100-2026-11-26/measured-steps.json");
  CAPTURE(path);
  const RunResult r = run_paradyse("published --json --table " + path);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto runs = paradyse::evaluation::load_published_runs(path);
  REQUIRE(j.at("runs").size() == runs.size());
  REQUIRE(runs.size() == 12);
  for (const auto& row : j.at("runs")) {
    CHECK(row.at("predicted_s").get<double>() > 0);
    CHECK(row.at("fits") == true);  // one GPU holds these models at every length measured
  }
}
