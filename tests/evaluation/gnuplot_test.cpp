// The gnuplot module: what quoted() writes, gnuplot reads back as the same text; plots land in folders
// whose names hold spaces and quotes; a failing or missing gnuplot is an InputError that says where.
#include "evaluation/gnuplot.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.hpp"
#include "tests/temp_dir.hpp"

namespace paradyse::evaluation {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Sets PATH for one scope.
class PathSetting {
 public:
  explicit PathSetting(const char* path) : saved_(std::getenv("PATH") != nullptr ? std::getenv("PATH") : "") {
    setenv("PATH", path, 1);
  }
  ~PathSetting() { setenv("PATH", saved_.c_str(), 1); }

 private:
  std::string saved_;
};

}  // namespace

TEST_CASE("gnuplot: a plot lands in a folder whose name holds a space and a single quote",
          "[evaluation][gnuplot]") {
  TempDir temp;
  const fs::path dir = temp.path() / "run's plots";
  fs::create_directories(dir);
  gnuplot::Plot plot{.png = dir / "time by length.png",
                     .settings = {"set title " + gnuplot::quoted("paradyse's \"curve\"")},
                     .series = {{"1 1\n2 4\n3 9\n", "1:2", "with lines", "it's a_b"},
                                {"", "1:2", "with lines", "no points"}}};
  const fs::path work = dir / "plot work";
  gnuplot::draw({plot}, work);
  REQUIRE(fs::exists(plot.png));
  CHECK(read_bytes(plot.png).starts_with("\x89PNG\r\n\x1a\n"));
  CHECK_FALSE(fs::exists(work));
}

TEST_CASE("gnuplot: a plot with no point at all is an empty frame, and the next plot autoscales",
          "[evaluation][gnuplot]") {
  TempDir temp;
  // Every policy out of memory on the first sequence: nothing to draw on log scales.
  const gnuplot::Plot empty{.png = temp.path() / "empty.png",
                            .settings = {"set logscale xy"},
                            .series = {{"", "1:2", "with lines", "a"}, {"", "1:2", "with lines", "b"}}};
  const gnuplot::Plot next{.png = temp.path() / "next.png",
                           .settings = {"unset logscale"},
                           .series = {{"100 5\n200 7\n", "1:2", "with lines", "c"}}};
  gnuplot::draw({empty, next}, temp.path() / "work");
  CHECK(read_bytes(empty.png).starts_with("\x89PNG\r\n\x1a\n"));
  CHECK(read_bytes(next.png).starts_with("\x89PNG\r\n\x1a\n"));
  CHECK_THAT(gnuplot::script({empty, next}), Catch::Contains("set autoscale xy"));
}

TEST_CASE("gnuplot: quoted text reads back unchanged", "[evaluation][gnuplot]") {
  TempDir temp;
  const fs::path printed = temp.path() / "it's printed.txt";
  for (const std::string text :
       {"plain", "it's", "''", "back\\slash\\", "\"double\"", "two\nlines, it's \"so\"",
        "carriage\r\nreturn\\n", "no `echo command` runs", "'", "'''a''''b'", "$x @y %z"}) {
    CAPTURE(text);
    gnuplot::run("set print " + gnuplot::quoted(printed.string()) + "\nprint " + gnuplot::quoted(text) + "\n",
                 temp.path() / "work");
    CHECK(read_bytes(printed) == text + "\n");
  }
}

TEST_CASE("gnuplot: a failing script is an InputError naming the log, which stays", "[evaluation][gnuplot]") {
  TempDir temp;
  const fs::path work = temp.path() / "work's";
  try {
    gnuplot::run("print nosuchfunction(1)\n", work);
    FAIL("gnuplot accepted an undefined function");
  } catch (const InputError& e) {
    CHECK(e.file() == (work / "gnuplot.log").string());
    CHECK(fs::exists(work / "gnuplot.log"));
    CHECK_THAT(e.what(), Catch::Contains("nosuchfunction"));
  }
}

TEST_CASE("gnuplot: a missing gnuplot is an InputError saying how to install it", "[evaluation][gnuplot]") {
  TempDir temp;
  const PathSetting no_programs(temp.path().c_str());
  try {
    gnuplot::run("print 1\n", temp.path() / "work");
    FAIL("ran a gnuplot that is not on the PATH");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("expected gnuplot on the PATH") && Catch::Contains("gnuplot-nox"));
  }
}

}  // namespace paradyse::evaluation
