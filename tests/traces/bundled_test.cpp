// The bundled real traces: every name loads, and the statistics agree with the "# stats:" headers that
// the traces' makers wrote, read here from the data files themselves (traces/data/).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "traces/stats.hpp"
#include "traces/trace.hpp"

using namespace paradyse::traces;

namespace {

// key → value of the "# stats: key=value key=value ..." header lines of a trace file.
std::map<std::string, std::string> header_stats(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::map<std::string, std::string> stats;
  std::string line;
  while (std::getline(in, line) && line.starts_with("#")) {
    if (!line.starts_with("# stats: ")) continue;
    std::istringstream words(line.substr(9));
    std::string word;
    while (words >> word)
      if (const auto equals = word.find('='); equals != std::string::npos)
        stats[word.substr(0, equals)] = word.substr(equals + 1);
  }
  return stats;
}

int64_t integer(const std::map<std::string, std::string>& stats, const std::string& key) {
  INFO(key);
  REQUIRE(stats.count(key) == 1);
  return std::stoll(stats.at(key));
}

}  // namespace

TEST_CASE("bundled traces: every name loads", "[traces]") {
  REQUIRE(bundled_trace_names() ==
          std::vector<std::string>{"github-code-like", "grch38", "grch38-char", "repo-level-code"});
  for (const std::string& name : bundled_trace_names()) {
    INFO(name);
    const Trace trace = load_trace(name);
    REQUIRE(trace.name == name);
    REQUIRE_FALSE(trace.description.empty());
    REQUIRE_FALSE(trace.lengths.empty());
    REQUIRE(std::all_of(trace.lengths.begin(), trace.lengths.end(), [](int64_t n) { return n > 0; }));
  }
}

TEST_CASE("github-code-like: 86,626 samples minus its empty ones", "[traces]") {
  const Trace trace = load_trace("github-code-like");
  REQUIRE(trace.empty_samples > 0);
  REQUIRE(static_cast<int64_t>(trace.lengths.size()) + trace.empty_samples == 86626);
  REQUIRE_THAT(trace.description,
               Catch::Contains("GitHubCode-style") && Catch::Contains("Linux kernel 6.12"));
}

TEST_CASE("bundled traces: statistics match the files' own # stats: headers", "[traces]") {
  // The headers count empty samples (their min is 0), so the comparison puts them back; the statistics
  // paradyse reports leave them out, which can move the percentiles but not the total or the maximum.
  for (const auto& [name, file] : std::map<std::string, std::string>{{"github-code-like", "github-code-like"},
                                                                     {"repo-level-code", "repo-level-code"},
                                                                     {"grch38-char", "grch38-gene-spans"}}) {
    INFO(name);
    const auto header = header_stats("traces/data/" + file + ".txt");
    const Trace trace = load_trace(name);
    std::vector<int64_t> with_empty(static_cast<std::size_t>(trace.empty_samples), 0);
    with_empty.insert(with_empty.end(), trace.lengths.begin(), trace.lengths.end());
    const TraceStats stats = trace_stats(with_empty);
    REQUIRE(stats.count == integer(header, "count"));
    REQUIRE(stats.total_tokens == integer(header, "total_tokens"));
    REQUIRE(stats.min == integer(header, "min"));
    REQUIRE(stats.median == integer(header, "median"));
    REQUIRE(stats.p90 == integer(header, "p90"));
    REQUIRE(stats.p99 == integer(header, "p99"));
    REQUIRE(stats.max == integer(header, "max"));
    REQUIRE(stats.mean == Approx(std::stod(header.at("mean"))).margin(0.05));  // printed to 0.1

    const TraceStats reported = trace_stats(trace.lengths);
    REQUIRE(reported.count == integer(header, "count") - trace.empty_samples);
    REQUIRE(reported.total_tokens == integer(header, "total_tokens"));
    REQUIRE(reported.max == integer(header, "max"));
  }
}

TEST_CASE("grch38 is grch38-char in 3-mer tokens: each length / 3, rounded up", "[traces]") {
  const Trace nucleotides = load_trace("grch38-char");
  const Trace three_mers = load_trace("grch38");
  REQUIRE(three_mers.lengths.size() == nucleotides.lengths.size());
  REQUIRE(three_mers.empty_samples == nucleotides.empty_samples);
  for (std::size_t i = 0; i < nucleotides.lengths.size(); ++i) {
    const auto expected = static_cast<int64_t>(std::ceil(static_cast<double>(nucleotides.lengths[i]) / 3.0));
    if (three_mers.lengths[i] != expected)
      FAIL("sample " << i << ": " << three_mers.lengths[i] << " != ceil(" << nucleotides.lengths[i]
                     << " / 3)");
  }
  REQUIRE_THAT(three_mers.description, Catch::Contains("3-mer"));
}
