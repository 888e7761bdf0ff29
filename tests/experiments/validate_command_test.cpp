// `paradyse calibrate` then `paradyse validate`: the calibrated file is a valid cluster, and what the
// real backend holds at its peak is what the simulator's memory timeline predicts.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "hw_models/cluster.hpp"
#include "tests/experiments/run_paradyse.hpp"
#include "tests/temp_dir.hpp"

namespace paradyse::testing {

TEST_CASE("validate: measured peak memory is the simulated one and times come with their error",
          "[real][cli]") {
  TempDir dir;
  const std::string cluster = dir.file("local-cpu.json");
  const RunResult calibrated = run_paradyse("calibrate --ranks 2 --out " + cluster);
  INFO(calibrated.err);
  REQUIRE(calibrated.exit_code == 0);
  const hw::ClusterSpec spec = hw::load_cluster(cluster);
  CHECK(spec.gpus_per_node == 2);
  CHECK(spec.gpu.bf16_flops_per_second > 0);

  const RunResult r = run_paradyse(
      "validate --ranks 2 --model tiny-llama --plan all --seq 64 --steps 1 "
      "--json --cluster " +
      cluster);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto rows = nlohmann::json::parse(r.out);
  REQUIRE(rows.size() == 5);  // every strategy runs tiny-llama on 2 ranks
  for (const auto& row : rows) {
    INFO(row.dump());
    CHECK(row["measured_s"].get<double>() > 0);
    CHECK(row["simulated_s"].get<double>() > 0);
    CHECK(row["time_error"].get<double>() ==
          Approx(row["simulated_s"].get<double>() / row["measured_s"].get<double>() - 1));
    // In bf16 the backend allocates exactly the tensors the tracer records, in the same element types.
    CHECK(std::abs(row["memory_error"].get<double>()) < 0.01);
  }
}

TEST_CASE("validate: asks for a calibration when the cluster file is missing", "[real][cli]") {
  const RunResult r = run_paradyse("validate --ranks 2 --seq 64 --cluster /nonexistent/local-cpu.json");
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Contains("paradyse calibrate --ranks 2"));
}

}  // namespace paradyse::testing
