// The profile CSV: exact round trip, and one InputError naming file, line and column per kind of bad file.
#include "steps/profile.hpp"
#include "tests/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "common/errors.hpp"

using namespace paradyse;
using namespace paradyse::steps;

using paradyse::testing::TempDir;

namespace {

const std::string header =
    "model,cluster,degree,batch,source,strategy,recompute,seq,iteration_time_s,peak_memory_bytes,"
    "saved_bytes_per_layer\n";
const std::string good_row =
    "gpt-8l,dgx-a100 x2,8,1,sim,megatron_ts,none,4096,0.3125,21474836480,402653184\n";

std::string write_text(const TempDir& dir, const std::string& text) {
  const std::string path = dir.file("profile.csv");
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The InputError that reading `text` raises; fails the test if it reads.
InputError read_error(const std::string& text) {
  TempDir dir;
  const std::string path = write_text(dir, text);
  try {
    read_profile(path);
  } catch (const InputError& e) {
    CHECK(e.file() == path);
    return e;
  }
  FAIL("read_profile accepted:\n" << text);
  throw std::logic_error("unreachable");
}

Profile sample_profile() {
  // Names with what CSV must quote: a comma, quotes, a line break.
  Profile profile{.model = "gpt-8l \"tuned\"",
                  .cluster = "dgx-a100, x2\nrack 3",
                  .degree = 8,
                  .batch = 2,
                  .source = "analytic",
                  .points = {}};
  // Values whose shortest decimal form is long, at the ends of the ranges a profile takes, or not
  // exactly representable.
  profile.points = {
      {"megatron_ts", "none", 1024, 0.1, 1.0 / 3.0 + 1, 2.0 / 7.0 + 1},
      {"megatron_ts", "selective", 1024, std::nextafter(1e-9, 1.0), 1.0, std::nextafter(1e15, 0.0)},
      {"ulysses_z", "full", 624000, 12.345678901234567, 85899345920.0, 123456789.00000001},
      {"metp", "none", 3, std::nextafter(1.0, 2.0), 1.3000000000000003, 6.02214076e14},
  };
  return profile;
}

bool same_bits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

}  // namespace

TEST_CASE("profile: write then read gives the same points, bit for bit", "[costmodel][learned]") {
  TempDir dir;
  const Profile written = sample_profile();
  const std::string path = dir.file("gpt-8l.csv");
  write_profile(written, path);
  REQUIRE_FALSE(std::filesystem::exists(path + ".partial"));

  const Profile read = read_profile(path);
  CHECK(read.model == written.model);
  CHECK(read.cluster == written.cluster);
  CHECK(read.degree == written.degree);
  CHECK(read.batch == written.batch);
  CHECK(read.source == written.source);
  REQUIRE(read.points.size() == written.points.size());
  for (std::size_t i = 0; i < read.points.size(); ++i) {
    const ProfilePoint& a = read.points[i];
    const ProfilePoint& b = written.points[i];
    INFO("point " << i);
    CHECK(a.strategy == b.strategy);
    CHECK(a.recompute == b.recompute);
    CHECK(a.seq == b.seq);
    CHECK(same_bits(a.iteration_time_s, b.iteration_time_s));
    CHECK(same_bits(a.peak_memory_bytes, b.peak_memory_bytes));
    CHECK(same_bits(a.saved_bytes_per_layer, b.saved_bytes_per_layer));
  }
}

TEST_CASE("profile: the CSV has the documented header and one row per point", "[costmodel][learned]") {
  std::ostringstream out;
  Profile profile{
      .model = "gpt-8l", .cluster = "dgx-a100 x2", .degree = 8, .batch = 1, .source = "sim", .points = {}};
  profile.points = {{"megatron_ts", "none", 4096, 0.3125, 21474836480.0, 402653184.0}};
  write_profile(profile, out);
  CHECK(out.str() == header + good_row);
}

TEST_CASE("profile: bad files are InputErrors naming file, line and column", "[costmodel][learned]") {
  SECTION("empty file") {
    InputError e = read_error("");
    CHECK(e.line() == 1);
  }
  SECTION("wrong header") {
    InputError e = read_error(
        "model,cluster,degree,batch,source,strategy,recompute,tokens,iteration_time_s,peak_memory_bytes,"
        "saved_bytes_per_layer\n" +
        good_row);
    CHECK(e.line() == 1);
    CHECK(e.field() == "seq");
  }
  SECTION("header only") {
    InputError e = read_error(header);
    CHECK(e.line() == 2);
  }
  SECTION("too few columns") {
    InputError e = read_error(header + good_row + "gpt-8l,dgx-a100 x2,8,1,sim,megatron_ts,none,8192,0.5\n");
    CHECK(e.line() == 3);
    CHECK(e.field() == "peak_memory_bytes");
  }
  SECTION("too many columns") {
    InputError e = read_error(header + "gpt-8l,dgx-a100 x2,8,1,sim,megatron_ts,none,8192,0.5,1,2,3\n");
    CHECK(e.line() == 2);
    CHECK(e.field() == "saved_bytes_per_layer");
  }
  SECTION("blank line") {
    InputError e = read_error(header + good_row + "\n");
    CHECK(e.line() == 3);
  }
  SECTION("non-numeric length") {
    InputError e = read_error(header + "gpt-8l,dgx-a100 x2,8,1,sim,megatron_ts,none,8k,0.5,1,2\n");
    CHECK(e.line() == 2);
    CHECK(e.field() == "seq");
  }
  SECTION("fractional length") {
    InputError e = read_error(header + "gpt-8l,dgx-a100 x2,8,1,sim,megatron_ts,none,8192.5,0.5,1,2\n");
    CHECK(e.field() == "seq");
  }
  SECTION("number with trailing text") {
    InputError e = read_error(header + "gpt-8l,dgx-a100 x2,8,1,sim,megatron_ts,none,8192,0.5s,1,2\n");
    CHECK(e.field() == "iteration_time_s");
  }
  SECTION("zero time") {
    InputError e = read_error(header + "gpt-8l,dgx-a100 x2,8,1,sim,megatron_ts,none,8192,0,1,2\n");
    CHECK(e.field() == "iteration_time_s");
  }
  SECTION("negative memory") {
    InputError e = read_error(header + "gpt-8l,dgx-a100 x2,8,1,sim,megatron_ts,none,8192,0.5,-1,2\n");
    CHECK(e.field() == "peak_memory_bytes");
  }
  SECTION("not a number") {
    InputError e = read_error(header + "gpt-8l,dgx-a100 x2,8,1,sim,megatron_ts,none,8192,0.5,1,nan\n");
    CHECK(e.field() == "saved_bytes_per_layer");
  }
  SECTION("infinite") {
    InputError e = read_error(header + "gpt-8l,dgx-a100 x2,8,1,sim,megatron_ts,none,8192,inf,1,2\n");
    CHECK(e.field() == "iteration_time_s");
  }
  SECTION("zero degree") {
    InputError e = read_error(header + "gpt-8l,dgx-a100 x2,0,1,sim,megatron_ts,none,8192,0.5,1,2\n");
    CHECK(e.field() == "degree");
  }
  SECTION("unknown recompute") {
    InputError e =
        read_error(header + good_row + "gpt-8l,dgx-a100 x2,8,1,sim,megatron_ts,some,8192,0.5,1,2\n");
    CHECK(e.line() == 3);
    CHECK(e.field() == "recompute");
  }
  SECTION("unknown source") {
    InputError e = read_error(header + "gpt-8l,dgx-a100 x2,8,1,guess,megatron_ts,none,8192,0.5,1,2\n");
    CHECK(e.field() == "source");
  }
  SECTION("empty strategy") {
    InputError e = read_error(header + "gpt-8l,dgx-a100 x2,8,1,sim,,none,8192,0.5,1,2\n");
    CHECK(e.field() == "strategy");
  }
  SECTION("another model than the first row") {
    InputError e =
        read_error(header + good_row + "gpt-4l,dgx-a100 x2,8,1,sim,megatron_ts,none,8192,0.5,1,2\n");
    CHECK(e.line() == 3);
    CHECK(e.field() == "model");
  }
  SECTION("another cluster than the first row") {
    InputError e = read_error(header + good_row + "gpt-8l,dgx-h100,8,1,sim,megatron_ts,none,8192,0.5,1,2\n");
    CHECK(e.field() == "cluster");
  }
  SECTION("another degree than the first row") {
    InputError e =
        read_error(header + good_row + "gpt-8l,dgx-a100 x2,4,1,sim,megatron_ts,none,8192,0.5,1,2\n");
    CHECK(e.field() == "degree");
  }
  SECTION("another batch than the first row") {
    InputError e =
        read_error(header + good_row + "gpt-8l,dgx-a100 x2,8,2,sim,megatron_ts,none,8192,0.5,1,2\n");
    CHECK(e.field() == "batch");
  }
  SECTION("another source than the first row") {
    InputError e =
        read_error(header + good_row + "gpt-8l,dgx-a100 x2,8,1,real,megatron_ts,none,8192,0.5,1,2\n");
    CHECK(e.field() == "source");
  }
  SECTION("duplicate (strategy, recompute, seq)") {
    InputError e = read_error(header + good_row +
                              "gpt-8l,dgx-a100 x2,8,1,sim,megatron_ts,full,4096,0.5,1,2\n" + good_row);
    CHECK(e.line() == 4);
    CHECK(e.field() == "seq");
    CHECK_THAT(e.what(), Catch::Contains("line 2"));
  }
}

TEST_CASE("profile: CRLF line ends read like LF", "[costmodel][learned]") {
  TempDir dir;
  std::string text = header + good_row;
  for (std::size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 2))
    text.replace(at, 1, "\r\n");
  const Profile profile = read_profile(write_text(dir, text));
  REQUIRE(profile.points.size() == 1);
  CHECK(profile.cluster == "dgx-a100 x2");
  CHECK(profile.points[0].saved_bytes_per_layer == 402653184.0);
}

TEST_CASE("profile: a missing file is an InputError naming it", "[costmodel][learned]") {
  TempDir dir;
  const std::string path = dir.file("absent.csv");
  try {
    read_profile(path);
    FAIL("read a missing file");
  } catch (const InputError& e) {
    CHECK(e.file() == path);
  }
}

TEST_CASE("profile: a profile the format cannot hold is rejected before anything is written",
          "[costmodel][learned]") {
  TempDir dir;
  const std::string path = dir.file("bad.csv");
  Profile profile = sample_profile();
  SECTION("an empty name") {
    profile.cluster = "";
    REQUIRE_THROWS_AS(write_profile(profile, path), InputError);
  }
  SECTION("a non-positive value") {
    profile.points[2].peak_memory_bytes = 0;
    try {
      write_profile(profile, path);
      FAIL("wrote a zero peak memory");
    } catch (const InputError& e) {
      CHECK(e.file() == path);
      CHECK(e.line() == 6);  // rows of two lines: the cluster's name holds a line break
      CHECK(e.field() == "peak_memory_bytes");
    }
  }
  SECTION("a duplicate point") {
    profile.points.push_back(profile.points[0]);
    REQUIRE_THROWS_AS(write_profile(profile, path), InputError);
  }
  SECTION("an unknown recompute") {
    profile.points[0].recompute = "partial";
    REQUIRE_THROWS_AS(write_profile(profile, path), InputError);
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(path + ".partial"));
}
