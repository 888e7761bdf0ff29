// `paradyse export` and `paradyse simulate --chakra` as a user runs them.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "tests/experiments/run_paradyse.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse::testing;

namespace {

double iteration_s(const std::string& arguments) {
  const RunResult r = run_paradyse(arguments + " --json");
  INFO(arguments << "\n" << r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out).at("iteration_time_s").get<double>();
}

}  // namespace

TEST_CASE("paradyse export, then simulate --chakra: the plan's simulated time", "[chakra][experiments]") {
  const TempDir dir;
  const std::string prefix = dir.file("not/yet/there/step");  // export makes the folders
  const RunResult exported = run_paradyse("export --plan ulysses_z --seq 8K --out " + prefix);
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);
  CHECK_THAT(exported.out, Catch::Contains("8 ranks") && Catch::Contains(prefix + ".7.et") &&
                               Catch::Contains(prefix + ".comm_groups.json"));
  CHECK(std::filesystem::exists(prefix + ".comm_groups.json"));
  const double direct = iteration_s("simulate --plan ulysses_z --seq 8K");
  CHECK(iteration_s("simulate --chakra " + prefix) == Approx(direct).epsilon(0.01));
  CHECK(iteration_s("simulate --chakra " + prefix + " --price-compute") == Approx(direct).epsilon(0.01));
  const RunResult table = run_paradyse("simulate --chakra " + prefix);
  CHECK_THAT(table.out, Catch::Contains("Chakra traces") && Catch::Contains("ulysses_z") &&
                            Catch::Contains("iteration time"));
}

TEST_CASE("paradyse export --groups: a grouped step, with its own comm-group file", "[chakra][experiments]") {
  const TempDir dir;
  const RunResult exported = run_paradyse("export --plan megatron_cz --groups 4:8K,2:4K,2:4K/8:16K --out " +
                                          dir.file("g") + " --comm-group-file " + dir.file("groups.json"));
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);
  const auto groups = nlohmann::json::parse(std::ifstream(dir.file("groups.json")));
  CHECK(groups.size() >= 4);  // the job, a group of four, two of two
  CHECK(iteration_s("simulate --chakra " + dir.file("g") + " --comm-group-file " + dir.file("groups.json")) >
        0);
}

TEST_CASE("paradyse simulate --chakra refuses a cut or foreign file by name and node, exit 2",
          "[chakra][experiments]") {
  const TempDir dir;
  const std::string prefix = dir.file("t");
  REQUIRE(run_paradyse("export --plan megatron_ts --seq 4K --out " + prefix).exit_code == 0);
  const std::string three = prefix + ".3.et";
  std::filesystem::resize_file(three, std::filesystem::file_size(three) / 2);
  RunResult r = run_paradyse("simulate --chakra " + prefix);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("t.3.et") && Catch::Contains("node[") && Catch::Contains("truncated"));

  std::filesystem::copy_file(prefix + ".comm_groups.json", three,
                             std::filesystem::copy_options::overwrite_existing);
  r = run_paradyse("simulate --chakra " + prefix);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("t.3.et") && Catch::Contains("metadata"));

  r = run_paradyse("simulate --chakra " + dir.file("missing"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("missing.0.et"));
}

TEST_CASE("paradyse export and simulate --chakra refuse flags that do not apply", "[chakra][experiments]") {
  const TempDir dir;
  const std::string out = " --out " + dir.file("x");
  for (const std::string& arguments : std::vector<std::string>{
           "export --plan ulysses_z --groups 8:8K --seq 8K" + out,
           "export --plan ulysses_z --seq 8K --shard-group node" + out,
           "export --plan ulysses_z --groups 8:8K/4:8K" + out,
           "export --plan ulysses_z --groups 8:eight" + out, "export --plan ulysses_z --seq 8K",
           "simulate --chakra " + dir.file("x") + " --plan ulysses_z",
           "simulate --chakra " + dir.file("x") + " --seq 8K",
           "simulate --plan ulysses_z --seq 8K --price-compute", std::string("simulate --seq 8K")}) {
    const RunResult r = run_paradyse(arguments);
    INFO(arguments << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("paradyse: error:"));
  }
  CHECK_THAT(run_paradyse("export --help").out, Catch::Contains("Chakra") && Catch::Contains("--groups") &&
                                                    Catch::Contains("--comm-group-file"));
  CHECK_THAT(run_paradyse("simulate --help").out,
             Catch::Contains("--chakra") && Catch::Contains("--price-compute"));
}
