// Output paths are checked before a run does its work: a path that cannot be written fails at once,
// naming the flag, and the check itself leaves nothing behind.
#include "common/atomic_file.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "common/errors.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;
namespace fs = std::filesystem;

namespace {

std::string output_error(const std::string& path, OutputKind kind) {
  try {
    check_output_path(path, kind, "--out");
  } catch (const InputError& e) {
    CHECK(e.file() == "--out");
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("check_output_path: paths that cannot be written are refused with the reason", "[common]") {
  testing::TempDir dir;
  std::ofstream(dir.file("a-file")) << "x";
  fs::create_directories(dir.path() / "a-folder");
  CHECK_THAT(output_error("", OutputKind::folder), Catch::Contains("an empty path"));
  CHECK_THAT(output_error("/proc/paradyse-out", OutputKind::folder),
             Catch::Contains("cannot create anything"));
  CHECK_THAT(output_error("/proc/paradyse-out.json", OutputKind::file),
             Catch::Contains("cannot create anything"));
  CHECK_THAT(output_error(dir.file("x/.."), OutputKind::folder), Catch::Contains("not a name"));
  CHECK_THAT(output_error("/", OutputKind::folder), Catch::Contains("not a name"));
  CHECK_THAT(output_error(dir.file("a-file"), OutputKind::folder), Catch::Contains("is not a folder"));
  CHECK_THAT(output_error(dir.file("a-folder"), OutputKind::file), Catch::Contains("is a folder"));
  CHECK_THAT(output_error(dir.file("a-file/below"), OutputKind::file), Catch::Contains("is not a folder"));
}

TEST_CASE("check_output_path: writable paths pass and nothing is left behind", "[common]") {
  testing::TempDir dir;
  fs::create_directories(dir.path() / "a-folder");
  CHECK(output_error(dir.file("out"), OutputKind::folder).empty());
  CHECK(output_error(dir.file("out/"), OutputKind::folder).empty());
  CHECK(output_error(dir.file("a-folder"), OutputKind::folder).empty());  // written again: a resume
  CHECK(output_error(dir.file("new/deeper/result.json"), OutputKind::file).empty());
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::recursive_directory_iterator(dir.path())) ++entries;
  CHECK(entries == 1);  // a-folder alone: no probe, no created parent
}
