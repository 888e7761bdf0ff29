// simulate builds only the nodes the job uses: a job of one node on a cluster of 1000 nodes takes the
// memory and the result of a one-node cluster, and an absurd cluster size is no internal error. The
// progress bar shows on a terminal only, never on stdout.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <pty.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "tests/experiments/run_paradyse.hpp"

using namespace paradyse::testing;

namespace {

// In a forked child: runs `arguments` (the program first) with stdout into `out_path`.
[[noreturn]] void exec_with_stdout(const std::vector<std::string>& arguments, const std::string& out_path) {
  const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out < 0 || dup2(out, STDOUT_FILENO) < 0) _exit(126);
  std::vector<char*> argv;
  for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

// Runs `arguments` (the program first) with stdout into `out_path`; returns its exit code and sets
// `max_rss_bytes` to its peak resident memory (paradyse execs paradyse-sim in the same process).
int run_measured(const std::vector<std::string>& arguments, const std::string& out_path,
                 double& max_rss_bytes) {
  const pid_t pid = fork();
  if (pid == 0) {
    exec_with_stdout(arguments, out_path);
  }
  if (pid < 0) return -1;
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  max_rss_bytes = static_cast<double>(usage.ru_maxrss) * 1024;  // Linux: kilobytes
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> words_of(const std::string& command) {
  std::vector<std::string> words = {paradyse_path()};
  std::istringstream in(command);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// Runs `arguments` (the program first) with stdin, stdout and stderr on a new terminal, then stdout
// redirected into `out_path`; returns what the terminal showed.
std::string run_on_terminal(const std::vector<std::string>& arguments, const std::string& out_path,
                            int& exit_code) {
  int terminal = -1;
  const pid_t pid = forkpty(&terminal, nullptr, nullptr, nullptr);
  if (pid == 0) {
    exec_with_stdout(arguments, out_path);
  }
  std::string shown;
  if (pid < 0) return shown;
  char buffer[4096];
  for (ssize_t n; (n = read(terminal, buffer, sizeof buffer)) > 0;)  // EIO once the program is gone
    shown.append(buffer, static_cast<std::size_t>(n));
  int status = 0;
  waitpid(pid, &status, 0);
  close(terminal);
  exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return shown;
}

const std::string kJob = "simulate --model gpt-8l --plan megatron_ts --seq 4096 --json";

}  // namespace

TEST_CASE("simulate --nodes 1000 --degree 8: one node's memory and one node's result", "[experiments]") {
  // Before: over 8 GB and a failure after 77 s.
  const auto dir = temp_dir();
  const std::string out = (dir / "out.json").string();
  double max_rss_bytes = 0;
  REQUIRE(run_measured(words_of(kJob + " --degree 8 --nodes 1000"), out, max_rss_bytes) == 0);
  CHECK(max_rss_bytes > 0);
  CHECK(max_rss_bytes < 500e6);
  const auto thousand = nlohmann::json::parse(read_text(out));
  std::filesystem::remove_all(dir);
  const RunResult one = run_paradyse(kJob + " --degree 8 --nodes 1");
  REQUIRE(one.exit_code == 0);
  const auto b = nlohmann::json::parse(one.out);
  CHECK(thousand.at("iteration_time_s").get<double>() == b.at("iteration_time_s").get<double>());
  CHECK(thousand.at("events") == b.at("events"));
  CHECK(thousand.at("peak_memory_bytes") == b.at("peak_memory_bytes"));
}

TEST_CASE("simulate: a degree-16 job on 100 nodes gives what it gives on 2 nodes", "[experiments]") {
  for (const char* plan : {"megatron_cz", "ulysses_z"}) {
    const std::string job =
        std::string("simulate --model gpt-8l --plan ") + plan + " --seq 16K --degree 16 --json";
    const RunResult two = run_paradyse(job + " --nodes 2");
    const RunResult hundred = run_paradyse(job + " --nodes 100");
    REQUIRE(two.exit_code == 0);
    REQUIRE(hundred.exit_code == 0);
    CHECK(nlohmann::json::parse(hundred.out).at("iteration_time_s").get<double>() ==
          nlohmann::json::parse(two.out).at("iteration_time_s").get<double>());
  }
}

TEST_CASE("simulate --nodes 100000: a result or a clear input error, never an internal one",
          "[experiments]") {
  // Before: std::bad_alloc (exit 3) building routes between 800000 GPUs.
  for (const char* degree : {" --degree 8", ""}) {  // without: every GPU of the cluster
    const RunResult r = run_paradyse(kJob + degree + " --nodes 100000");
    INFO(r.err);
    CHECK((r.exit_code == 0 || r.exit_code == 2));
    if (r.exit_code == 2) CHECK_THAT(r.err, Catch::StartsWith("paradyse: error:"));
  }
}

TEST_CASE("simulate: a progress bar on a terminal's stderr, never on stdout nor in a log", "[experiments]") {
  // A few seconds: long enough for the progress bar, which shows after two seconds on a terminal only.
  const std::string job = "simulate --model llama-8l --plan ulysses_z --seq 64K --degree 64 --nodes 8 --json";
  const RunResult logged = run_paradyse(job);
  REQUIRE(logged.exit_code == 0);
  CHECK(logged.err.empty());
  CHECK(logged.out.find('\r') == std::string::npos);
  CHECK(nlohmann::json::parse(logged.out).at("degree") == 64);

  // On a terminal, stdout still going to a file.
  const auto dir = temp_dir();
  const std::string out = (dir / "out.json").string();
  const auto start = std::chrono::steady_clock::now();
  int exit_code = -1;
  const std::string shown = run_on_terminal(words_of(job), out, exit_code);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(exit_code == 0);
  if (wall_s > 3) CHECK_THAT(shown, Catch::Contains("simulating"));  // the bar, on the terminal
  const std::string json = read_text(out);
  CHECK(json.find('\r') == std::string::npos);
  CHECK(nlohmann::json::parse(json).at("degree") == 64);
  std::filesystem::remove_all(dir);
}
