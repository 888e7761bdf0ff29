#include "common/child_processes.hpp"

#include <poll.h>
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

namespace {

void write_all(int fd, const std::string& bytes) {
  for (std::size_t written = 0; written < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw InternalError(std::string("a child's result could not be written: ") + std::strerror(errno));
    written += static_cast<std::size_t>(n);
  }
}

}  // namespace

void run_in_children(std::size_t count, int jobs, const std::function<std::string(std::size_t)>& task,
                     const std::function<void(std::size_t, const std::string&)>& done,
                     const std::function<bool()>& idle) {
  if (jobs < 1) throw InternalError("run_in_children: jobs must be positive");
  struct Running {
    int fd = -1;  // the read end of the child's pipe; −1 once it reached its end
    std::string bytes;
    std::optional<int> status;  // once reaped
  };
  ChildProcesses children;                 // killed if this throws
  std::map<std::size_t, Running> running;  // by task
  const auto close_all = [&] {
    for (auto& [index, child] : running)
      if (child.fd >= 0) ::close(child.fd);
  };
  std::size_t next = 0;
  bool idle_work = static_cast<bool>(idle);
  try {
    while (next < count || !running.empty()) {
      while (next < count && static_cast<int>(running.size()) < jobs) {
        int fds[2];
        if (::pipe(fds) != 0) throw InternalError(std::string("pipe failed: ") + std::strerror(errno));
        const std::size_t index = next++;
        children.start(static_cast<int>(index), [&] {
          ::close(fds[0]);
          write_all(fds[1], task(index));
          return 0;
        });
        ::close(fds[1]);
        running[index].fd = fds[0];
      }
      // Reads whatever the children wrote: a child's pipe ends when it exits, so a result is whole
      // once its pipe ended and its child was reaped (read first: a result larger than the pipe
      // holds would block its child).
      std::vector<pollfd> polls;
      std::vector<std::size_t> polled;
      for (const auto& [index, child] : running)
        if (child.fd >= 0) {
          polls.push_back({child.fd, POLLIN, 0});
          polled.push_back(index);
        }
      if (idle_work && !polls.empty()) idle_work = idle();
      if (!polls.empty() && ::poll(polls.data(), polls.size(), idle_work ? 0 : -1) < 0 && errno != EINTR)
        throw InternalError(std::string("poll failed: ") + std::strerror(errno));
      for (std::size_t i = 0; i < polls.size(); ++i) {
        if (polls[i].revents == 0) continue;
        Running& child = running[polled[i]];
        char buffer[65536];
        const ssize_t n = ::read(child.fd, buffer, sizeof buffer);
        if (n > 0) {
          child.bytes.append(buffer, static_cast<std::size_t>(n));
        } else if (n == 0 || errno != EINTR) {
          ::close(child.fd);
          child.fd = -1;
        }
      }
      const auto ended_unreaped = [&] {
        for (const auto& [index, child] : running)
          if (child.fd < 0 && !child.status) return true;
        return false;
      };
      while (ended_unreaped()) {
        const std::optional<ChildProcesses::Ended> ended = children.wait_next();
        if (!ended) throw InternalError("run_in_children: a child's pipe ended but no child is running");
        running[static_cast<std::size_t>(ended->id)].status = ended->status;
      }
      for (auto it = running.begin(); it != running.end();) {
        auto& [index, child] = *it;
        if (child.fd >= 0 || !child.status) {
          ++it;
          continue;
        }
        if (*child.status != 0)
          throw InternalError("task " + std::to_string(index) + " " + describe_exit(*child.status));
        done(index, child.bytes);
        it = running.erase(it);
      }
    }
  } catch (...) {
    close_all();
    throw;
  }
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
