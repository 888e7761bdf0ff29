// Worker processes: each one's exit is reported once with how it ended, a deadline stops the wait,
// and a worker never outlives the process that started it.
#include "common/child_processes.hpp"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "tests/temp_dir.hpp"

namespace paradyse::testing {
namespace {

// Alive and not a zombie waiting to be reaped.
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, name, state;
  if (!(stat >> pid_field >> name >> state)) return false;
  return state != "Z" && state != "X";
}

}  // namespace

TEST_CASE("child processes: every exit is reported once, with its status", "[common][processes]") {
  ChildProcesses children;
  children.start(10, [] { return 0; });
  children.start(11, [] { return 3; });
  children.start(12, []() -> int { throw std::runtime_error("a worker's error"); });
  children.start(13, [] {
    raise(SIGKILL);
    return 0;
  });
  CHECK(children.running() == 4);
  std::map<int, int> codes;
  while (const auto ended = children.wait_next()) codes[ended->id] = exit_code(ended->status);
  CHECK(children.running() == 0);
  CHECK(codes == std::map<int, int>{{10, 0}, {11, 3}, {12, 2}, {13, 128 + SIGKILL}});
  CHECK_FALSE(children.wait_next().has_value());  // nothing left to wait for
}

TEST_CASE("child processes: a deadline ends the wait, kill_all stops the rest", "[common][processes]") {
  ChildProcesses children;
  children.start(7, [] {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  });
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(children.wait_next(start + std::chrono::milliseconds(200)).has_value());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(children.kill_all() == std::vector<int>{7});
  const auto ended = children.wait_next();
  REQUIRE(ended.has_value());
  CHECK(describe_exit(ended->status) == "was killed by signal 9 (Killed)");
}

TEST_CASE("child processes: workers die with the process that started them", "[common][processes]") {
  TempDir dir;
  const std::string pid_file = dir.file("worker.pid");
  // A sweep starts a long worker and is then killed, as by Ctrl-C or a scheduler.
  ChildProcesses sweep;
  sweep.start(0, [&] {
    ChildProcesses workers;
    workers.start(1, [&] {
      std::ofstream(pid_file) << getpid() << "\n";
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return 0;
    });
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  });
  pid_t worker = -1;
  for (int i = 0; i < 500 && worker <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream(pid_file) >> worker;
  }
  REQUIRE(worker > 0);
  CHECK(running(worker));
  sweep.kill_all();
  (void)sweep.wait_next();
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    gone = !running(worker);
  }
  CHECK(gone);
}

TEST_CASE("child processes: tasks run a few at a time and each one's bytes come back whole",
          "[common][processes]") {
  // Results larger than a pipe holds (64 KiB on Linux), so that a child blocks until they are read.
  const auto result = [](std::size_t i) { return std::string(100000 + i, static_cast<char>('a' + i)); };
  std::map<std::size_t, std::string> results;
  std::set<pid_t> pids;
  run_in_children(
      7, 3, [&](std::size_t i) { return std::to_string(getpid()) + ":" + result(i); },
      [&](std::size_t i, const std::string& bytes) {
        const std::size_t colon = bytes.find(':');
        pids.insert(static_cast<pid_t>(std::stol(bytes.substr(0, colon))));
        CHECK(results.emplace(i, bytes.substr(colon + 1)).second);
      });
  REQUIRE(results.size() == 7);
  for (const auto& [i, bytes] : results) CHECK(bytes == result(i));
  CHECK(pids.size() == 7);  // a process each
  CHECK(pids.count(getpid()) == 0);
}

TEST_CASE("child processes: a task that fails stops the run and is named", "[common][processes]") {
  std::vector<std::size_t> done;
  CHECK_THROWS_WITH(run_in_children(
                        4, 1,
                        [](std::size_t i) -> std::string {
                          if (i == 2) throw std::runtime_error("no such plan");
                          return "ok";
                        },
                        [&](std::size_t i, const std::string&) { done.push_back(i); }),
                    "task 2 exited with status 2");
  CHECK(done == std::vector<std::size_t>{0, 1});  // one at a time: the tasks after it never ran
}

}  // namespace paradyse::testing
