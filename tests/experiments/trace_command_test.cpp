// `paradyse trace`: list, stats (table byte for byte, JSON keys), convert (the .pb reads back to the same
// statistics), and bad inputs (a clear message, a non-zero exit, nothing on stdout).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/experiments/run_paradyse.hpp"

using namespace paradyse::testing;

TEST_CASE("trace list: one line per bundled trace", "[experiments]") {
  const RunResult r = run_paradyse("trace list");
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.out, Catch::StartsWith("name "));
  for (const char* line_start :
       {"\ngithub-code-like     86603     1183    6905012  code, file level", "\ngrch38 ", "\ngrch38-char ",
        "\nrepo-level-code       5391    12139   40147422  code, repository level"})
    REQUIRE_THAT(r.out, Catch::Contains(line_start));
  REQUIRE(std::count(r.out.begin(), r.out.end(), '\n') == 5);
}

TEST_CASE("trace stats: the table of a crafted trace, byte for byte", "[experiments]") {
  const RunResult r = run_paradyse("trace stats tests/traces/data/crafted.txt");
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.out == read_text("tests/traces/data/crafted_stats.expected"));
}

TEST_CASE("trace stats --json prints the documented keys", "[experiments]") {
  const RunResult r = run_paradyse("trace stats github-code-like --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.at("name") == "github-code-like");
  REQUIRE(j.at("count") == 86603);
  REQUIRE(j.at("empty_samples") == 23);
  REQUIRE(j.at("total_tokens") == 450215361);
  REQUIRE(j.at("max") == 6905012);
  for (const char* key : {"mean", "min", "median", "p90", "p99"}) REQUIRE(j.at(key).get<double>() > 0);
  REQUIRE(j.at("buckets").size() == 7);
  int64_t counted = 0;
  double fractions = 0;
  for (const auto& bucket : j.at("buckets")) {
    REQUIRE(bucket.at("label").is_string());
    counted += bucket.at("count").get<int64_t>();
    fractions += bucket.at("fraction").get<double>();
  }
  REQUIRE(counted == 86603);
  REQUIRE(fractions == Approx(1.0));
}

TEST_CASE("trace stats: CSV column and JSONL field", "[experiments]") {
  const RunResult csv = run_paradyse("trace stats tests/traces/data/lengths.csv --column tokens --json");
  REQUIRE(csv.exit_code == 0);
  REQUIRE(nlohmann::json::parse(csv.out).at("total_tokens") == 70125);
  const RunResult jsonl = run_paradyse("trace stats tests/traces/data/lengths.jsonl --field length --json");
  REQUIRE(jsonl.exit_code == 0);
  REQUIRE(nlohmann::json::parse(jsonl.out).at("total_tokens") == 9300);
}

TEST_CASE("trace convert: the .pb file has the same statistics as its source", "[experiments]") {
  const auto dir = temp_dir();
  const std::string pb = (dir / "grch38.pb").string();
  const RunResult convert = run_paradyse("trace convert grch38 " + pb);
  REQUIRE(convert.exit_code == 0);
  REQUIRE_THAT(convert.out, Catch::Contains("58037 samples"));
  REQUIRE(std::filesystem::exists(pb));
  REQUIRE_FALSE(std::filesystem::exists(pb + ".partial"));
  const RunResult from_pb = run_paradyse("trace stats " + pb + " --json");
  REQUIRE(from_pb.exit_code == 0);
  REQUIRE(from_pb.out == run_paradyse("trace stats grch38 --json").out);
  std::filesystem::remove_all(dir);
}

TEST_CASE("trace: bad inputs fail with a clear message and no output", "[experiments]") {
  const auto dir = temp_dir();
  std::ofstream(dir / "bad.txt") << "# header\n100\n-5\n";
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"trace stats no/such/trace.txt", "no/such/trace.txt: expected a trace file or a bundled trace name"},
      {"trace stats " + (dir / "bad.txt").string(),
       "bad.txt:3: expected a non-negative whole number of tokens"},
      {"trace stats tests/traces/data/lengths.csv", "lengths.csv:1: field 'length': expected a column named"},
      {"trace stats tests/traces/data/lengths.jsonl --field tokens", "lengths.jsonl:1: field 'tokens'"},
      {"trace convert github-code-like " + (dir / "out.txt").string(),
       "expected an output file name ending in .pb"},
      {"trace convert no/such/trace.txt " + (dir / "out.pb").string(), "no/such/trace.txt"},
      {"trace resample github-code-like " + (dir / "long.txt").string() + " --count 0", "--count"},
      {"trace resample github-code-like " + (dir / "long.txt").string(), "--count is required"},
      {"trace resample " + (dir / "bad.txt").string() + " " + (dir / "long.txt").string() + " --count 9",
       "bad.txt:3: expected a non-negative whole number of tokens"},
      {"trace", "expected a subcommand of 'paradyse trace' (list, stats, convert, resample), got none"},
      {"trace stats", "trace is required"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const RunResult r = run_paradyse(c.args);
    REQUIRE(r.exit_code != 0);
    REQUIRE_THAT(r.err, Catch::Contains(c.message));
    REQUIRE(r.out.empty());
  }
  REQUIRE_FALSE(std::filesystem::exists(dir / "out.pb"));
  REQUIRE_FALSE(std::filesystem::exists(dir / "long.txt"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("trace subcommands explain themselves with --help", "[experiments]") {
  for (const char* command : {"trace", "trace list", "trace stats", "trace convert", "trace resample"}) {
    INFO(command);
    const RunResult r = run_paradyse(std::string(command) + " --help");
    REQUIRE(r.exit_code == 0);
    REQUIRE_THAT(r.out, Catch::Contains("Usage") || Catch::Contains("usage"));
  }
}
