// paradyse sweep: rows equal to running each point alone, the same rows under mpirun, a killed sweep
// resumed without losing or repeating a point, bad specs refused before anything runs.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <thread>

#include "tests/experiments/run_paradyse.hpp"
#include "tests/experiments/slow_sweep.hpp"

using namespace paradyse::testing;

namespace {

const char* kPolicies = "static:megatron_ts,static:metp,paradyse,optimal";

std::string write_spec(const std::filesystem::path& dir, const std::string& name, const std::string& text) {
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

std::string small_spec(const std::filesystem::path& dir) {
  return write_spec(
      dir, "spec.json",
      std::string(R"({"base": {"trace": "tests/experiments/data/oom_trace.txt", "engine": "analytic",
                                    "order": "dataset", "policies": ")") +
          kPolicies + R"("},
                    "axes": {"cluster": ["dgx-a100", "dgx-h100"], "nodes": [1, 2]}})");
}

std::vector<nlohmann::json> rows_of(const std::filesystem::path& out) {
  return nlohmann::json::parse(read_text(out / "sweep.json")).at("rows").get<std::vector<nlohmann::json>>();
}

}  // namespace

TEST_CASE("sweep: a 2x2 grid gives the rows of running each point alone", "[experiments]") {
  const auto dir = temp_dir();
  const RunResult r =
      run_paradyse("sweep --spec " + small_spec(dir) + " --jobs 2 --out " + (dir / "out").string());
  REQUIRE(r.exit_code == 0);
  for (const char* file : {"sweep.csv", "sweep.json", "speedup.png", "longest.png", "rows.jsonl"})
    CHECK(std::filesystem::exists(dir / "out" / file));
  const auto rows = rows_of(dir / "out");
  REQUIRE(rows.size() == 4);
  const std::map<std::string, std::pair<std::string, int>> points = {
      {"cluster=dgx-a100 nodes=1", {"dgx-a100", 1}},
      {"cluster=dgx-a100 nodes=2", {"dgx-a100", 2}},
      {"cluster=dgx-h100 nodes=1", {"dgx-h100", 1}},
      {"cluster=dgx-h100 nodes=2", {"dgx-h100", 2}}};
  for (const auto& row : rows) {
    const std::string id = row.at("id");
    CAPTURE(id);
    const auto& [cluster, nodes] = points.at(id);
    const RunResult alone =
        run_paradyse("compare --trace tests/experiments/data/oom_trace.txt --engine analytic --policy " +
                     std::string(kPolicies) + " --cluster " + cluster + " --nodes " + std::to_string(nodes) +
                     " --json --out " + (dir / "alone").string());
    REQUIRE(alone.exit_code == 0);
    const auto summary = nlohmann::json::parse(alone.out).at("policies");
    for (const auto& [policy, values] : summary.items()) {
      CAPTURE(policy);
      const auto& swept = row.at("policies").at(policy);
      CHECK(swept.at("total_time_s").get<double>() == values.at("total_time_s").get<double>());
      CHECK(swept.at("tokens_per_s").get<double>() == values.at("tokens_per_s").get<double>());
      CHECK(swept.at("mfu").get<double>() == values.at("mfu").get<double>());
      CHECK(swept.at("max_len_before_oom") == values.at("max_len_before_oom"));
    }
  }
  // The CSV holds the same numbers as the JSON, one line per point.
  const std::string csv = read_text(dir / "out" / "sweep.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 5);
  CHECK_THAT(csv, Catch::Contains("static:metp.max_len_before_oom"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("sweep: under mpirun -np 2 the rows are those of --jobs 1", "[experiments]") {
  const auto dir = temp_dir();
  const std::string spec = small_spec(dir);
  REQUIRE(run_paradyse("sweep --spec " + spec + " --jobs 1 --out " + (dir / "one").string()).exit_code == 0);
  const std::string command =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2 " +
      paradyse_path() + " sweep --spec " + spec + " --out " + (dir / "mpi").string() + " >" +
      (dir / "mpi.log").string() + " 2>&1";
  const int status = std::system(command.c_str());
  INFO(read_text(dir / "mpi.log"));
  REQUIRE(status == 0);
  CHECK_THAT(read_text(dir / "mpi.log"), Catch::Contains("over 2 MPI ranks"));
  CHECK(read_text(dir / "mpi" / "sweep.csv") == read_text(dir / "one" / "sweep.csv"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("sweep: a sweep killed mid-run and restarted has every point exactly once", "[experiments]") {
  const auto dir = temp_dir();
  const std::string spec = write_spec(dir, "spec.toml", kSlowSweepSpec);
  const auto out = dir / "out", rows = out / "rows.jsonl";
  const std::string sweep = paradyse_path() + " sweep --spec " + spec + " --out " + out.string();
  // A session of its own, so that killing its group takes the forked points with it.
  const std::string start =
      "setsid sh -c 'echo $$ > " + (dir / "pid").string() + "; exec " + sweep + " >/dev/null 2>&1' &";
  REQUIRE(std::system(start.c_str()) == 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = std::filesystem::exists(rows) ? read_text(rows) : "";
    if (std::count(text.begin(), text.end(), '\n') >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string pid = read_text(dir / "pid");
  REQUIRE(!pid.empty());
  REQUIRE(std::system(("kill -9 -" + pid.substr(0, pid.find('\n')) + " 2>/dev/null").c_str()) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string before = read_text(rows);
  const auto finished = std::count(before.begin(), before.end(), '\n');
  CHECK(finished >= 2);
  CHECK(finished < kSlowSweepPoints);  // killed before the end

  const RunResult resumed = run_paradyse("sweep --spec " + spec + " --out " + out.string());
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains(std::to_string(kSlowSweepPoints - finished) + " run now, " +
                                          std::to_string(finished) + " from an earlier run"));
  std::map<int, int> seen;
  for (const auto& row : rows_of(out)) seen[row.at("point").get<int>()] += 1;
  std::map<int, int> in_file;
  std::istringstream lines(read_text(rows));
  std::string line;
  while (std::getline(lines, line)) in_file[nlohmann::json::parse(line).at("point").get<int>()] += 1;
  for (int point = 0; point < kSlowSweepPoints; ++point) {
    CAPTURE(point);
    CHECK(seen[point] == 1);
    CHECK(in_file[point] == 1);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("sweep: a bad spec is refused with the field named, and nothing runs", "[experiments]") {
  const auto dir = temp_dir();
  struct Case {
    std::string spec;
    std::string message;
  };
  const Case cases[] = {
      {R"({"axes": {"gpus": ["a100"]}})", "field 'axes.gpus': unknown axis"},
      {R"({"axes": {"nodes": []}})", "field 'axes.nodes': expected a non-empty list"},
      {R"({"axes": {"nodes": [1, "two"]}})",
       "field 'axes.nodes[1]': expected a positive integer up to 2147483647, got \"two\""},
      {R"({"axes": {"nvlink_scale": [0.5, -1]}})",
       "field 'axes.nvlink_scale[1]': expected a positive finite number"},
      {R"({"base": {"modle": "gpt-8l"}, "axes": {"nodes": [1]}})", "field 'base.modle': unknown key"},
      {R"({"base": {"mode": "guess"}, "axes": {"nodes": [1]}})",
       "field 'base.mode': expected compare or plan"},
      {R"({"axes": {"cluster": ["dgx-z100"]}})", "dgx-z100"},
      {R"({"axes": {"trace": ["no/such/trace.txt"]}})", "no/such/trace.txt"},
      {R"({"base": {}})", "field 'axes'"},
  };
  for (const Case& c : cases) {
    INFO(c.spec);
    const std::string spec = write_spec(dir, "bad.json", c.spec);
    const RunResult r = run_paradyse("sweep --spec " + spec + " --out " + (dir / "out").string());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK(r.out.empty());
    CHECK(!std::filesystem::exists(dir / "out"));
  }
  const std::string toml = write_spec(dir, "bad.toml", "[axes]\nnodes = [1, 2\n");
  const RunResult r = run_paradyse("sweep --spec " + toml + " --out " + (dir / "out").string());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("bad.toml:"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("sweep --plan-only plans on a length grid instead of running the trace", "[experiments]") {
  const auto dir = temp_dir();
  const RunResult r =
      run_paradyse("sweep --plan-only --spec " + small_spec(dir) + " --json --out " + (dir / "out").string());
  REQUIRE(r.exit_code == 0);
  const auto rows = nlohmann::json::parse(r.out).at("rows");
  REQUIRE(rows.size() == 4);
  // Lengths 1K, 2K, ..., 1M: megatron_ts fits gpt-8l on one dgx-a100 up to 110,880 tokens (plan --longest).
  CHECK(rows[0].at("id") == "cluster=dgx-a100 nodes=1");
  CHECK(rows[0].at("policies").at("static:megatron_ts").at("max_len_before_oom") == 65536);
  CHECK(rows[0].at("policies").at("static:metp").at("max_len_before_oom") == 524288);
  std::filesystem::remove_all(dir);
}

TEST_CASE("sweep with tune_statics: the speedups over the fastest tuned static that compare gives",
          "[experiments]") {
  const auto dir = temp_dir();
  const std::string spec = write_spec(dir, "spec.json", R"({"base": {
      "trace": "github-code-like", "limit": 300, "max_len": "16K", "order": "dataset", "engine": "analytic",
      "policies": "static:megatron_ts,static:ulysses_z,paradyse", "global_batch_tokens": "64K",
      "micro_batch_tokens": "16K", "tune_statics": "8K,32K"}, "axes": {"nodes": [1]}})");
  const RunResult r = run_paradyse("sweep --spec " + spec + " --json --out " + (dir / "out").string());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto row = nlohmann::json::parse(r.out).at("rows").at(0);
  CHECK(row.at("policies").contains("static:ulysses_z@32K"));
  const RunResult alone = run_paradyse(
      "compare --trace github-code-like --limit 300 --max-len 16K --engine analytic --policy "
      "static:megatron_ts,static:ulysses_z,paradyse --global-batch-tokens 64K --micro-batch-tokens 16K "
      "--tune-statics 8K,32K --json --out " +
      (dir / "alone").string());
  INFO(alone.err);
  REQUIRE(alone.exit_code == 0);
  const auto summary = nlohmann::json::parse(alone.out);
  bool found = false;
  for (const auto& speedup : summary.at("tuned_statics").at("speedups")) {
    if (speedup.at("baseline_role").get<std::string>().find("the fastest tuned static") == std::string::npos)
      continue;
    found = true;
    CHECK(row.at("fastest_tuned_static") == speedup.at("baseline"));
    CHECK(row.at("speedup_tuned_paradyse").get<double>() ==
          speedup.at("speedup_on_common_steps").get<double>());
  }
  CHECK(found);
  CHECK_THAT(read_text(dir / "out" / "sweep.csv"), Catch::Contains("speedup_tuned_paradyse"));
  std::filesystem::remove_all(dir);
}
