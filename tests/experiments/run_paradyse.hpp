// Runs the paradyse executable (PARADYSE_BIN, set by ctest), or another program, and captures what it
// printed.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

#include <sys/wait.h>

namespace paradyse::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline std::filesystem::path temp_dir() {
  std::random_device random;
  auto dir = std::filesystem::temp_directory_path() / ("paradyse-test-" + std::to_string(random()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `binary arguments` through the shell, stdout and stderr captured apart.
inline RunResult run_program(const std::string& binary, const std::string& arguments) {
  const auto dir = temp_dir();
  const std::string command =
      binary + " " + arguments + " >" + (dir / "out").string() + " 2>" + (dir / "err").string();
  const int status = std::system(command.c_str());
  RunResult result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(dir / "out"),
                   read_text(dir / "err")};
  std::filesystem::remove_all(dir);
  return result;
}

// The paradyse executable the tests run (PARADYSE_BIN, set by ctest). The test executables do not
// wait for it to build (a whole build builds it), so a partial build is told what to build.
inline std::string paradyse_path() {
  const char* bin = std::getenv("PARADYSE_BIN");
  const std::string path = bin != nullptr ? bin : "build/experiments/paradyse";
  if (!std::filesystem::exists(path))
    throw std::runtime_error(path +
                             " does not exist: these tests run paradyse, paradyse-sim and paradyse-real "
                             "(cmake --build build, or --target paradyse paradyse-real)");
  return path;
}

inline RunResult run_paradyse(const std::string& arguments) {
  return run_program(paradyse_path(), arguments);
}

}  // namespace paradyse::testing
