#include "real_backend/launcher.hpp"

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

#include "common/child_processes.hpp"
#include "common/errors.hpp"

namespace paradyse::real {
namespace {

// One line to stderr in one write: the ranks write theirs to the same stream at the same moments, and
// a line written piece by piece is cut by theirs.
void say(const std::string& line) {
  std::cerr << line << std::flush;
}

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

int parse_count(const std::string& text, const char* variable, int minimum) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < minimum)
    throw InputError(
        "", 0, variable,
        "expected an integer >= " + std::to_string(minimum) + " in the environment, got '" + text + "'");
  return value;
}

std::string tcp_store() {
  return "tcp:" + env("MASTER_ADDR").value_or("127.0.0.1") + ":" + env("MASTER_PORT").value_or("29500");
}

// The command line this process was started with, as exec needs it.
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (std::size_t start = 0; start < all.size();) {
    const std::size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end - start));
    start = end == std::string::npos ? all.size() : end + 1;
  }
  return args;
}

// Runs in the child: this command line again, as rank `rank`; returns only when exec fails.
int exec_rank(const std::vector<std::string>& args, int rank, int ranks, const std::string& store) {
  setenv("PARADYSE_RANK", std::to_string(rank).c_str(), 1);
  setenv("PARADYSE_WORLD_SIZE", std::to_string(ranks).c_str(), 1);
  setenv("PARADYSE_STORE", store.c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  say("paradyse: rank " + std::to_string(rank) + ": exec failed: " + std::strerror(errno) + "\n");
  return 127;
}

}  // namespace

std::optional<RankEnvironment> rank_from_environment() {
  struct Source {
    const char* rank;
    const char* size;
    const char* launcher;
  };
  for (const Source& s :
       {Source{"PARADYSE_RANK", "PARADYSE_WORLD_SIZE", "paradyse"},
        Source{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun"},
        Source{"PMI_RANK", "PMI_SIZE", "mpirun"}, Source{"SLURM_PROCID", "SLURM_NTASKS", "srun"},
        Source{"RANK", "WORLD_SIZE", "torchrun"}}) {
    const auto rank = env(s.rank), size = env(s.size);
    if (!rank || !size) continue;
    RankEnvironment e;
    e.size = parse_count(*size, s.size, 1);
    e.rank = parse_count(*rank, s.rank, 0);
    if (e.rank >= e.size)
      throw InputError("", 0, s.rank,
                       "expected a rank below " + std::string(s.size) + " = " + *size + ", got " + *rank);
    e.local_rank = e.rank;
    for (const char* local : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
      if (const auto value = env(local)) {
        e.local_rank = parse_count(*value, local, 0);
        break;
      }
    e.store = env("PARADYSE_STORE").value_or(tcp_store());
    e.launcher = s.launcher;
    return e;
  }
  return std::nullopt;
}

int launch_local_ranks(int ranks, std::chrono::seconds grace) {
  const std::vector<std::string> args = own_arguments();
  const std::filesystem::path store =
      std::filesystem::temp_directory_path() / ("paradyse-store-" + std::to_string(getpid()));
  std::filesystem::remove(store);
  ChildProcesses children;  // the ranks go with the launcher
  for (int rank = 0; rank < ranks; ++rank)
    children.start(rank, [&] { return exec_rank(args, rank, ranks, "file:" + store.string()); });

  int result = 0;
  std::optional<std::chrono::steady_clock::time_point> deadline;  // for the others, once one failed
  while (children.running() > 0) {
    const auto ended = children.wait_next(deadline);
    if (!ended) {  // others still running `grace` after a failure
      for (int rank : children.kill_all())
        say("paradyse: rank " + std::to_string(rank) + " was still running " + std::to_string(grace.count()) +
            " s after another rank failed: killed\n");
      deadline.reset();  // only reaping is left
      continue;
    }
    if (ended->status != 0 && result == 0) {
      say("paradyse: rank " + std::to_string(ended->id) + " of " + std::to_string(ranks) + " " +
          describe_exit(ended->status) + (children.running() > 0 ? "; stopping the other ranks" : "") + "\n");
      // A rank killed by a signal lost the run its peers: the status of a run whose ranks lost each
      // other (4). A rank that exited on its own says why with its status (2: input, 3: internal).
      result = WIFSIGNALED(ended->status) ? kLostRankStatus : exit_code(ended->status);
      deadline = std::chrono::steady_clock::now() + grace;
    }
  }
  std::filesystem::remove(store);
  return result;
}

}  // namespace paradyse::real
