// Worker processes: the ranks a local launch starts and the points a sweep runs. Each is a fork of
// this process that dies with it (PR_SET_PDEATHSIG), so that killing the parent, by Ctrl-C or by a
// job scheduler, never leaves workers running on; they are reaped one at a time as they end.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace paradyse {

class ChildProcesses {
 public:
  ChildProcesses() = default;
  ChildProcesses(const ChildProcesses&) = delete;
  ChildProcesses& operator=(const ChildProcesses&) = delete;
  ~ChildProcesses();  // kills and reaps every child still running

  // Forks a child that runs `body` and exits with what it returns (2 if it throws, after printing
  // what). `id` names the child in what wait_next returns.
  void start(int id, const std::function<int()>& body);

  struct Ended {
    int id = 0;
    int status = 0;  // as waitpid gives it
  };
  // The next child to end, waiting at most until `until`; nullopt when it passes first or when no
  // child is running.
  std::optional<Ended> wait_next(std::optional<std::chrono::steady_clock::time_point> until = std::nullopt);
  // SIGKILL to every child still running; returns their ids (they are still to be reaped).
  std::vector<int> kill_all();
  int running() const { return static_cast<int>(children_.size()); }

 private:
  std::map<pid_t, int> children_;  // pid → id
};

// Runs task(0), ..., task(count − 1), `jobs` at a time, each in a child forked from this process as
// it is when the task starts; what a task returns comes back through a pipe to done(index, bytes),
// called in this process in the order the children end. A task that throws or dies stops the run:
// the others are killed and an InternalError says which task failed and how. While children run,
// `idle` (if set) is called whenever this process would wait for them, until it returns false (no
// more work of its own).
void run_in_children(std::size_t count, int jobs, const std::function<std::string(std::size_t)>& task,
                     const std::function<void(std::size_t, const std::string&)>& done,
                     const std::function<bool()>& idle = {});

// "exited with status 2", "was killed by signal 9 (Killed)".
std::string describe_exit(int status);
// What a shell would report: the exit status, or 128 + the signal that killed it.
int exit_code(int status);

}  // namespace paradyse
