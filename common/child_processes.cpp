#include "common/child_processes.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "common/errors.hpp"

namespace paradyse {

ChildProcesses::~ChildProcesses() {
  kill_all();
  for (const auto& [pid, id] : children_) waitpid(pid, nullptr, 0);
}

void ChildProcesses::start(int id, const std::function<int()>& body) {
  const pid_t parent = getpid();
  std::fflush(nullptr);  // what is buffered is written once, by the parent
  const pid_t pid = fork();
  if (pid < 0) throw InternalError(std::string("fork failed: ") + std::strerror(errno));
  if (pid > 0) {
    children_.emplace(pid, id);
    return;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);  // the parent died before the line above
  int status = 2;
  try {
    status = body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paradyse: %s\n", e.what());
  }
  std::fflush(nullptr);
  _exit(status);
}

std::optional<ChildProcesses::Ended> ChildProcesses::wait_next(
    std::optional<std::chrono::steady_clock::time_point> until) {
  while (!children_.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, until ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      throw InternalError(std::string("waitpid failed: ") + std::strerror(errno));
    }
    if (pid == 0) {  // none ended yet
      if (std::chrono::steady_clock::now() >= *until) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    const auto found = children_.find(pid);
    if (found == children_.end()) continue;  // not one of ours
    const Ended ended{found->second, status};
    children_.erase(found);
    return ended;
  }
  return std::nullopt;
}

std::vector<int> ChildProcesses::kill_all() {
  std::vector<int> ids;
  for (const auto& [pid, id] : children_) {
    kill(pid, SIGKILL);
    ids.push_back(id);
  }
  return ids;
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int exit_code(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace paradyse
