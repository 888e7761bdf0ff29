// User mistakes at the command line: each is a clear error on stderr with the paradyse prefix and exit
// status 2, before any work, with no output left behind; bounded inputs finish at once.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>

#include "tests/experiments/run_paradyse.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse::testing;
namespace fs = std::filesystem;

namespace {

void check_refused(const RunResult& r, const std::string& message) {
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("paradyse: error: ") && Catch::Contains(message));
  CHECK(r.out.empty());
}

}  // namespace

TEST_CASE("command line: flags CLI11 refuses exit 2 with the paradyse prefix", "[experiments]") {
  const RunResult unknown = run_paradyse("estimate --seq 4K --bogus");
  check_refused(unknown, "--bogus");
  CHECK_THAT(unknown.err, Catch::Contains("See 'paradyse estimate --help'"));
  check_refused(run_paradyse("estimate"), "--seq");  // a required flag missing
  check_refused(run_paradyse(""), "subcommand");
  check_refused(run_paradyse("simulate --plan megatron_ts"), "--seq");  // in paradyse-sim too
  for (const char* flag : {"--degree 0", "--degree -8", "--batch 0", "--nodes 0", "--degree 2.5"}) {
    INFO(flag);
    check_refused(run_paradyse(std::string("estimate --seq 4K ") + flag), "expected a positive whole number");
  }
  CHECK(run_paradyse("estimate --help").exit_code == 0);
}

TEST_CASE("command line: output paths that cannot be written fail before the work", "[experiments]") {
  TempDir dir;
  const fs::path cwd = fs::current_path();
  const auto start = std::chrono::steady_clock::now();
  check_refused(run_paradyse("compare --engine analytic --out ''"), "an empty path");
  check_refused(run_paradyse("compare --engine analytic --out /proc/paradyse-out"), "cannot create anything");
  check_refused(run_paradyse("simulate --plan megatron_ts --seq 4K --timeline /proc/t.json"), "--timeline");
  check_refused(run_paradyse("costmodel profile --seq 1K --out " + dir.file("")), "--out");
  // Refused at once, not after the whole compare (which takes seconds).
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK_FALSE(fs::exists(cwd / ".partial"));
  CHECK(fs::is_empty(dir.path()));
}

TEST_CASE("command line: lengths past the limit are refused at once, in flags and traces", "[experiments]") {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  check_refused(run_paradyse("estimate --strategy megatron_ts --seq 1099511627776"), "at most 2^30");
  const std::string trace = dir.write("huge.txt", "100\n1099511627776\n");
  const RunResult compare =
      run_paradyse("compare --engine analytic --trace " + trace + " --out " + dir.file("o"));
  check_refused(compare, "huge.txt:2");
  check_refused(run_paradyse("trace stats " + dir.write("max.txt", "100\n9223372036854775807\n")),
                "max.txt:2");
  check_refused(run_paradyse("compare --max-len 2G --out " + dir.file("o")), "--max-len");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK_FALSE(fs::exists(dir.file("o")));
  CHECK_FALSE(fs::exists(dir.file("o.partial")));
  // At the limit itself, every strategy is priced (or out of memory) in well under a second each.
  const RunResult at_limit = run_paradyse("estimate --seq 1024M --json");
  INFO(at_limit.err);
  CHECK(at_limit.exit_code == 0);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("command line: --max-len takes the K and M suffixes --seq takes", "[experiments]") {
  TempDir dir;
  const std::string trace = dir.write("t.txt", "1000\n20000\n3000\n");
  const RunResult r = run_paradyse("compare --engine analytic --policy static:megatron_ts --json --trace " +
                                   trace + " --max-len 16K --over drop --out " + dir.file("o"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(read_text(dir.file("o") + "/per_sequence.csv"), !Catch::Contains("20000"));
}

TEST_CASE("command line: a cluster value past a double names the file and line", "[experiments]") {
  TempDir dir;
  const std::string cluster = dir.write("c.json", "{\n  \"name\": \"x\",\n  \"gpus_per_node\": 1e999\n}\n");
  check_refused(run_paradyse("estimate --seq 4K --cluster " + cluster), "c.json:3");
}

TEST_CASE("command line: run checks its predicted memory against this machine's before starting ranks",
          "[experiments]") {
  // gpt-8l's weights, gradients and Adam states alone are 16 bytes × 14.5e9 parameters / 2 ranks.
  const auto start = std::chrono::steady_clock::now();
  check_refused(run_paradyse("run --model gpt-8l --ranks 2 --seq 64K"), "available memory");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("command line: --framework takes a preset or a file, and names a bad one", "[experiments]") {
  check_refused(run_paradyse("estimate --seq 4K --framework pytorch"),
                "expected a preset (eager-pytorch-h100-host, eager-pytorch-h200-host");
  TempDir dir;
  const std::string unsourced = dir.write(
      "framework.json",
      R"({"name": "mine", "description": "", "host_machine": "my laptop", "host": {"kernel_dispatch_seconds": 1e-5,
          "communication_dispatch_seconds": 1e-5, "synchronous": false, "source": {"kernel_dispatch_seconds": "timed",
          "communication_dispatch_seconds": "timed"}}})");
  check_refused(run_paradyse("simulate --plan megatron_ts --seq 4K --framework " + unsourced),
                unsourced + ": field 'host.source.synchronous'");
}
