#include "experiments/command_table.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/errors.hpp"

namespace paradyse::cli {
namespace {

const HandedOverCommand* find_command(std::string_view name) {
  for (const HandedOverCommand& command : kHandedOverCommands)
    if (command.name == name) return &command;
  return nullptr;
}

}  // namespace

std::string command_description(std::string_view name) {
  const HandedOverCommand* command = find_command(name);
  if (command == nullptr) throw InternalError("no handed-over command named " + std::string(name));
  return std::string(command->description);
}

void list_handed_over_commands(CLI::App& app) {
  for (const HandedOverCommand& command : kHandedOverCommands)
    app.add_subcommand(std::string(command.name), std::string(command.description))->allow_extras();
}

void hand_over(int argc, char** argv) {
  if (argc < 2) return;
  const HandedOverCommand* command = find_command(argv[1]);
  if (command == nullptr) return;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const std::string executable = (self.parent_path() / command->executable).string();
  std::vector<char*> args(argv, argv + argc);
  args[0] = const_cast<char*>(executable.c_str());
  args.push_back(nullptr);
  // OpenBLAS's threaded build starts a thread per core as it loads, which spins in sched_yield for
  // about 0.1 s of CPU: a core's worth of a short command, and a fifth of a LibTorch process's start.
  // The simulator's executable loads it (CBC's LAPACK) but multiplies no matrix worth sharing; a real
  // rank sizes OpenBLAS's pool to its share of the cores once it knows how many ranks share them
  // (real_backend/compute_threads.hpp), which grows the pool. One thread at load, unless the user
  // sets another.
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  execv(executable.c_str(), args.data());
  throw InputError(executable, 0, "",
                   "`paradyse " + std::string(command->name) + "` runs in " +
                       std::string(command->executable) + ", which could not be started (" +
                       std::strerror(errno) + "): build it with `cmake " + "--build build --target " +
                       std::string(command->executable) + "`");
}

}  // namespace paradyse::cli
