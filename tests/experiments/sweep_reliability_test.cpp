// A sweep survives what happens to long runs: its parent killed alone (the points die with it and a
// restart runs each missing point once), a row torn by a kill, a second run into the same folder; and
// it takes the spec a TOML user writes (a list of policies, none of them static).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <thread>

#include "tests/experiments/run_paradyse.hpp"
#include "tests/experiments/slow_sweep.hpp"

using namespace paradyse::testing;

namespace {

std::string write_spec(const std::filesystem::path& dir, const std::string& text) {
  const auto path = dir / "spec.toml";
  std::ofstream(path) << text;
  return path.string();
}

// Starts `paradyse arguments` in the background; returns its pid.
std::string start_in_background(const std::filesystem::path& dir, const std::string& arguments) {
  const std::string start = "sh -c 'echo $$ > " + (dir / "pid").string() + "; exec " + paradyse_path() + " " +
                            arguments + " >/dev/null 2>&1' &";
  REQUIRE(std::system(start.c_str()) == 0);
  std::string pid;
  for (int i = 0; i < 500 && pid.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    pid = read_text(dir / "pid");
  }
  REQUIRE(!pid.empty());
  return pid.substr(0, pid.find('\n'));
}

void wait_for_rows(const std::filesystem::path& rows, int count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = std::filesystem::exists(rows) ? read_text(rows) : "";
    if (std::count(text.begin(), text.end(), '\n') >= count) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL("no " << count << " rows in " << rows);
}

std::map<int, int> points_in(const std::filesystem::path& rows) {
  std::map<int, int> count;
  std::istringstream lines(read_text(rows));
  std::string line;
  while (std::getline(lines, line)) count[nlohmann::json::parse(line).at("point").get<int>()] += 1;
  return count;
}

}  // namespace

TEST_CASE("sweep: killing the sweep alone stops its points, and a restart at once runs each missing one",
          "[experiments][sweep]") {
  const auto dir = temp_dir();
  const std::string spec = write_spec(dir, kSlowSweepSpec);
  const auto out = dir / "out", rows = out / "rows.jsonl";
  const std::string pid =
      start_in_background(dir, "sweep --jobs 2 --spec " + spec + " --out " + out.string());
  wait_for_rows(rows, 1);
  REQUIRE(std::system(("kill -9 " + pid).c_str()) == 0);  // the parent only, not its group

  const RunResult resumed = run_paradyse("sweep --jobs 2 --spec " + spec + " --out " + out.string());
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // an orphan would append after this
  const std::map<int, int> in_file = points_in(rows);
  for (int point = 0; point < kSlowSweepPoints; ++point) {
    CAPTURE(point);
    CHECK(in_file.at(point) == 1);
  }
  CHECK(in_file.size() == kSlowSweepPoints);
  std::filesystem::remove_all(dir);
}

TEST_CASE("sweep: a row torn by a kill is dropped and its point runs again", "[experiments][sweep]") {
  const auto dir = temp_dir();
  const std::string spec = write_spec(dir, R"([base]
trace = "tests/experiments/data/oom_trace.txt"
engine = "analytic"

[axes]
nodes = [1, 2]
)");
  const auto out = dir / "out", rows = out / "rows.jsonl";
  REQUIRE(run_paradyse("sweep --spec " + spec + " --out " + out.string()).exit_code == 0);
  // Keep point 0's row and half of point 1's, as a kill during its append would.
  const std::string text = read_text(rows);
  const std::size_t first_end = text.find('\n');
  std::ofstream(rows, std::ios::trunc) << text.substr(0, first_end + 1 + (text.size() - first_end) / 2);

  const RunResult resumed = run_paradyse("sweep --spec " + spec + " --out " + out.string());
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("1 run now, 1 from an earlier run"));
  CHECK(points_in(rows) == std::map<int, int>{{0, 1}, {1, 1}});
  std::filesystem::remove_all(dir);
}

TEST_CASE("sweep: a second sweep into a folder in use is refused", "[experiments][sweep]") {
  const auto dir = temp_dir();
  const std::string spec = write_spec(dir, kSlowSweepSpec);
  const auto out = dir / "out";
  const std::string pid = start_in_background(dir, "sweep --spec " + spec + " --out " + out.string());
  for (int i = 0; i < 1000 && !std::filesystem::exists(out / "spec.json"); ++i)  // the sweep holds the folder
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(std::filesystem::exists(out / "spec.json"));
  const RunResult second = run_paradyse("sweep --spec " + spec + " --out " + out.string());
  CHECK(second.exit_code == 2);
  CHECK_THAT(second.err, Catch::Contains("is being written by another paradyse run"));
  // compare takes the same lock.
  const RunResult compare = run_paradyse(
      "compare --engine analytic --trace tests/experiments/data/oom_trace.txt --out " + out.string());
  CHECK(compare.exit_code == 2);
  CHECK_THAT(compare.err, Catch::Contains("is being written by another paradyse run"));
  std::system(("kill -9 " + pid).c_str());
  std::filesystem::remove_all(dir);
}

TEST_CASE("sweep: policies as a TOML list, none of them static", "[experiments][sweep]") {
  const auto dir = temp_dir();
  const std::string spec = write_spec(dir, R"([base]
trace = "tests/experiments/data/oom_trace.txt"
engine = "analytic"
policies = ["paradyse", "optimal"]

[axes]
nodes = [1, 2]
)");
  const auto out = dir / "out";
  for (int run = 0; run < 2; ++run) {  // the resume writes the outputs again
    const RunResult r = run_paradyse("sweep --spec " + spec + " --out " + out.string());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("nodes=1"));
  }
  const auto rows = nlohmann::json::parse(read_text(out / "sweep.json")).at("rows");
  REQUIRE(rows.size() == 2);
  for (const auto& row : rows) {
    CHECK(row.at("best_static") == "");
    CHECK(row.at("policies").contains("paradyse"));
    CHECK(row.at("policies").contains("optimal"));
  }
  CHECK(std::filesystem::exists(out / "sweep.csv"));
  std::filesystem::remove_all(dir);
}
