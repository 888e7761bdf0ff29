// paradyse is three executables (experiments/command_table.hpp): the light one must not load the
// simulator or LibTorch, the simulator's must not load LibTorch, and each command handed over reaches
// its executable with the whole command line, or says which executable is missing.
#include <catch2/catch.hpp>

#include <filesystem>

#include "tests/experiments/run_paradyse.hpp"
#include "tests/temp_dir.hpp"

namespace paradyse::testing {
namespace {

std::filesystem::path paradyse_bin() {
  return paradyse_path();
}

// The shared libraries the dynamic loader maps for `executable`, as ldd lists them.
std::string libraries(const std::filesystem::path& executable) {
  const RunResult r = run_program("ldd", executable.string());
  REQUIRE(r.exit_code == 0);
  return r.out;
}

}  // namespace

TEST_CASE("executables: paradyse loads neither SimGrid nor LibTorch, paradyse-sim not LibTorch", "[cli]") {
  const std::filesystem::path dir = paradyse_bin().parent_path();
  const std::string light = libraries(paradyse_bin()), sim = libraries(dir / "paradyse-sim");
  CHECK_THAT(light,
             !Catch::Contains("libsimgrid") && !Catch::Contains("libtorch") && !Catch::Contains("libmpi"));
  CHECK_THAT(sim, Catch::Contains("libsimgrid") && !Catch::Contains("libtorch"));
  CHECK_THAT(libraries(dir / "paradyse-real"), Catch::Contains("libtorch"));
}

TEST_CASE("executables: handed-over commands get their options, a missing executable is named", "[cli]") {
  // An option only the simulator's command knows reaches it, and its errors read as paradyse's.
  const RunResult bad = run_paradyse("simulate --plan megatron_ts --seq 0");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("paradyse: error: --seq"));
  const RunResult help = run_paradyse("compare --help");
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("Usage: paradyse compare") && Catch::Contains("--grid-ratio"));

  // paradyse copied alone to a folder: the commands it runs itself work, the others name what is missing.
  TempDir dir;
  const std::filesystem::path alone = dir.file("paradyse");
  std::filesystem::copy_file(paradyse_bin(), alone);
  CHECK(run_program(alone.string(), "estimate --strategy megatron_ts --seq 4K --json").exit_code == 0);
  const RunResult missing = run_program(alone.string(), "run --ranks 2");
  CHECK(missing.exit_code == 2);
  CHECK(missing.out.empty());
  CHECK_THAT(missing.err, Catch::Contains((dir.path() / "paradyse-real").string()) &&
                              Catch::Contains("--target paradyse-real"));
}

}  // namespace paradyse::testing
