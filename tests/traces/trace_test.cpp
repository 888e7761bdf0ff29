// The trace readers: plain (headers, comments, empty samples), CSV, JSONL and the Protobuf round trip,
// and one InputError naming the file and the line for each kind of bad input.
#include "traces/trace.hpp"
#include "tests/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <unistd.h>

#include "common/errors.hpp"
#include "traces/resample.hpp"

using namespace paradyse;
using namespace paradyse::traces;

using paradyse::testing::TempDir;

namespace {

std::string write_file(const TempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

struct BadInput {
  std::string name;  // the extension picks the reader
  std::string text;
  int line;
  std::string field;
  std::string message;
};

}  // namespace

TEST_CASE("plain reader: header and comment lines, empty samples skipped and counted", "[traces]") {
  const Trace trace = load_trace("tests/traces/data/crafted.txt");
  REQUIRE(trace.name == "tests/traces/data/crafted.txt");
  REQUIRE(trace.description ==
          "crafted for the tests: two samples per length bucket, on the bucket edges, and two empty samples; "
          "source: written by hand");
  REQUIRE(trace.lengths == std::vector<int64_t>{32768, 100, 131071, 4096, 500000, 16383, 8191, 65536, 4095,
                                                131072, 16384, 8192, 65535, 32767});
  REQUIRE(trace.empty_samples == 2);
}

TEST_CASE("plain reader: no final newline, CRLF line ends, no header (the file name describes it)",
          "[traces]") {
  TempDir dir;
  REQUIRE(load_trace(write_file(dir, "a.txt", "5\n6")).lengths == std::vector<int64_t>{5, 6});
  const Trace crlf = load_trace(write_file(dir, "lengths", "# source: a CRLF file\r\n5\r\n0\r\n6\r\n"));
  REQUIRE(crlf.lengths == std::vector<int64_t>{5, 6});
  REQUIRE(crlf.empty_samples == 1);
  REQUIRE(crlf.description == "a CRLF file");
  REQUIRE(load_trace(write_file(dir, "bare.txt", "7\n")).description == "bare.txt");
}

TEST_CASE("every text format skips a UTF-8 byte-order mark alike", "[traces]") {
  TempDir dir;
  const std::string bom = "\xEF\xBB\xBF";
  REQUIRE(load_trace(write_file(dir, "bom.txt", bom + "5\n6\n")).lengths == std::vector<int64_t>{5, 6});
  REQUIRE(load_trace(write_file(dir, "bom.csv", bom + "length,id\n5,a\n")).lengths ==
          std::vector<int64_t>{5});
  REQUIRE(load_trace(write_file(dir, "bom.jsonl", bom + "{\"length\": 5}\n")).lengths ==
          std::vector<int64_t>{5});
}

TEST_CASE("a header that is not UTF-8 is read with U+FFFD in place of its bad bytes", "[traces]") {
  TempDir dir;
  const Trace trace = load_trace(write_file(dir, "latin1.txt", "# trace: caf\xE9 lengths\n5\n"));
  REQUIRE(trace.description == "caf\xEF\xBF\xBD lengths");
}

TEST_CASE("lengths up to 2^30 tokens load, one above is refused in every format", "[traces]") {
  TempDir dir;
  REQUIRE(load_trace(write_file(dir, "limit.txt", "1073741824\n")).lengths == std::vector<int64_t>{1 << 30});
  const std::string above = "1073741825";
  for (const auto& [name, text, line, field] :
       {std::tuple{"above.txt", "5\n" + above + "\n", 2, ""},
        std::tuple{"above.csv", "length\n" + above + "\n", 2, "length"},
        std::tuple{"above.jsonl", "{\"length\": " + above + "}\n", 1, "length"},
        std::tuple{"max.txt", std::string("9223372036854775807\n"), 1, ""}}) {
    INFO(name);
    try {
      load_trace(write_file(dir, name, text));
      FAIL("accepted a length above the limit");
    } catch (const InputError& e) {
      REQUIRE(e.line() == line);
      REQUIRE(e.field() == field);
      REQUIRE_THAT(e.what(), Catch::Contains("at most 2^30 = 1073741824 tokens"));
    }
  }
}

TEST_CASE("CSV reader: the named column among others", "[traces]") {
  ReadOptions options;
  options.column = "tokens";
  const Trace trace = load_trace("tests/traces/data/lengths.csv", options);
  REQUIRE(trace.lengths == std::vector<int64_t>{120, 70000, 5});
  REQUIRE(trace.empty_samples == 1);
  REQUIRE(trace.name == "tests/traces/data/lengths.csv");
  REQUIRE(trace.description == "lengths.csv");
}

TEST_CASE("CSV reader: quoted fields hold commas, quotes and line breaks", "[traces]") {
  TempDir dir;
  const std::string path = write_file(
      dir, "quoted.csv",
      "id,path,length\r\n1,\"src/a,b.c\",120\r\n2,\"say \"\"hi\"\"\nagain.txt\",\"70\"\r\n3,plain,5\r\n");
  REQUIRE(load_trace(path).lengths == std::vector<int64_t>{120, 70, 5});
}

TEST_CASE("JSONL reader: the named field among others, in any position", "[traces]") {
  const Trace trace = load_trace("tests/traces/data/lengths.jsonl");
  REQUIRE(trace.lengths == std::vector<int64_t>{300, 9000});
  REQUIRE(trace.empty_samples == 1);

  TempDir dir;
  ReadOptions options;
  options.field = "tokens";
  REQUIRE(
      load_trace(write_file(dir, "t.jsonl", "{\"tokens\": 4}\n{\"tokens\": 8, \"length\": -1}\n"), options)
          .lengths == std::vector<int64_t>{4, 8});
}

TEST_CASE("Protobuf: writing then loading gives the same trace", "[traces]") {
  TempDir dir;
  const Trace original = load_trace("tests/traces/data/crafted.txt");
  const std::string path = dir.file("crafted.pb");
  write_protobuf_trace(original, path);
  REQUIRE_FALSE(std::filesystem::exists(path + ".partial"));
  const Trace loaded = load_trace(path);
  REQUIRE(loaded.name == original.name);
  REQUIRE(loaded.description == original.description);
  REQUIRE(loaded.lengths == original.lengths);
  REQUIRE(loaded.empty_samples == original.empty_samples);

  SECTION("a bundled trace survives too, and its file is smaller than its text") {
    const Trace bundled = load_trace("grch38-char");
    const std::string bundled_path = dir.file("grch38.pb");
    write_protobuf_trace(bundled, bundled_path);
    const Trace reloaded = load_trace(bundled_path);
    REQUIRE(reloaded.name == "grch38-char");
    REQUIRE(reloaded.lengths == bundled.lengths);
    REQUIRE(std::filesystem::file_size(bundled_path) <
            std::filesystem::file_size("traces/data/grch38-gene-spans.txt"));
  }
}

TEST_CASE("Protobuf: zeros written by another program are empty samples", "[traces]") {
  TempDir dir;
  // Field 3 (lengths), packed: tag 0x1A, 3 bytes, varints 5, 0, 9; then field 4 (empty_samples) = 2.
  const std::string bytes("\x1A\x03\x05\x00\x09\x20\x02", 7);
  const Trace trace = load_trace(write_file(dir, "foreign.pb", bytes));
  REQUIRE(trace.lengths == std::vector<int64_t>{5, 9});
  REQUIRE(trace.empty_samples == 3);
  REQUIRE(trace.name == dir.file("foreign.pb"));  // no name in the message: the path
}

TEST_CASE("bad trace files: an InputError naming the file and the line", "[traces]") {
  const std::string negative_varint =
      "\x1A\x0B\x05\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01";  // lengths 5, -1
  const BadInput cases[] = {
      {"negative.txt", "# header\n12\n-3\n", 3, "",
       "expected a non-negative whole number of tokens, got '-3'"},
      {"fraction.txt", "12\n1.5\n", 2, "", "got '1.5'"},
      {"text.txt", "12\n13\ntwelve\n", 3, "", "got 'twelve'"},
      {"space.txt", " 12\n", 1, "", "got ' 12'"},
      {"plus.txt", "+12\n", 1, "", "got '+12'"},
      {"minus-zero.txt", "-0\n", 1, "", "got '-0'"},
      {"huge.txt", "99999999999999999999\n", 1, "", "got '99999999999999999999'"},
      {"blank.txt", "12\n\n13\n", 2, "", "expected a sample on every line, got a blank line"},
      {"blank-end.txt", "12\n13\n\n", 3, "", "got a blank line"},
      {"headers.txt", "# trace: nothing\n# source: nowhere\n", 0, "",
       "expected at least one sample longer than 0 tokens, got none"},
      {"zeros.txt", "0\n0\n", 0, "", "got 2 empty samples"},
      {"empty.txt", "", 0, "", "got none"},
      {"no-column.csv", "id,tokens\n1,5\n", 1, "length",
       "expected a column named 'length' in the header row, got the columns 'id', 'tokens'"},
      {"negative.csv", "id,length\n1,5\n2,-4\n", 3, "length", "got '-4'"},
      {"quoted.csv", "id,length\n1,\"5 \"\n", 2, "length", "got '5 '"},
      {"blank.csv", "id,length\n1,5\n\n2,6\n", 3, "", "got a blank line"},
      {"unclosed.csv", "id,length\n1,5\n2,\"6\n3,7\n", 3, "", "expected a closing quote"},
      {"fields.csv", "id,length\n1,5,6\n", 2, "", "expected 2 comma-separated fields"},
      {"no-header.csv", "", 1, "", "expected a header row"},
      {"header-only.csv", "id,length\n", 0, "", "got none"},
      {"twice.csv", "length,id,length\n5,a,6\n", 1, "length", "got columns 1 and 3"},
      {"twice.jsonl", "{\"length\": 5}\n{\"length\": 5, \"length\": 6}\n", 2, "length",
       "expected each key once in an object, got it twice"},
      {"no-field.jsonl", "{\"length\": 5}\n{\"size\": 3, \"id\": 2}\n", 2, "length",
       "expected the field in every object, got the fields 'id', 'size'"},
      {"negative.jsonl", "{\"length\": -5}\n", 1, "length", "got '-5'"},
      {"fraction.jsonl", "{\"length\": 2.5}\n", 1, "length", "got '2.5'"},
      {"string.jsonl", "{\"length\": \"5\"}\n", 1, "length", "got '\"5\"'"},
      {"array.jsonl", "{\"length\": 1}\n[5]\n", 2, "", "expected one JSON object per line, got '[5]'"},
      {"malformed.jsonl", "{\"length\": 5\n", 1, "", "expected one JSON object per line"},
      {"blank.jsonl", "{\"length\": 5}\n\n", 2, "", "got a blank line"},
      {"garbage.pb", "not a protobuf\n", 0, "", "got bytes that do not parse as one"},
      {"negative.pb", negative_varint, 0, "lengths[1]", "got '-1'"},
  };
  TempDir dir;
  for (const BadInput& c : cases) {
    INFO(c.name);
    const std::string path = write_file(dir, c.name, c.text);
    // Loaded whole, and opened to be read as a run goes (a plain file is streamed): the same error.
    for (const bool streamed : {false, true}) {
      CAPTURE(streamed);
      try {
        if (streamed)
          TraceSource::open(path);
        else
          load_trace(path);
        FAIL("accepted " << c.name);
      } catch (const InputError& e) {
        REQUIRE(e.file() == path);
        REQUIRE(e.line() == c.line);
        REQUIRE(e.field() == c.field);
        REQUIRE_THAT(e.what(), Catch::Contains(c.message));
      }
    }
  }
}

TEST_CASE("streamed plain traces: the samples, description and counts of the trace loaded whole",
          "[traces]") {
  TempDir dir;
  // Over 2 MiB, so that lines cross the reader's 1 MiB blocks: a byte-order mark, headers, CRLF line
  // ends on some lines, empty samples, no final newline.
  std::string text = "\xEF\xBB\xBF# trace: made here\n# source: this test\n";
  for (int i = 0; i < 400000; ++i)
    text += std::to_string(i % 7 == 0 ? 0 : 1 + i * 37 % 100003) + (i % 3 ? "\n" : "\r\n");
  text += "42";
  const std::string path = write_file(dir, "long.txt", text);
  const Trace whole = load_trace(path);
  const TraceSource streamed = TraceSource::open(path);
  CHECK(streamed.name() == whole.name);
  CHECK(streamed.description() == "made here; source: this test");
  CHECK(streamed.description() == whole.description);
  CHECK(streamed.empty_samples() == whole.empty_samples);
  CHECK(streamed.samples() == static_cast<int64_t>(whole.lengths.size()));
  for (int pass = 0; pass < 2; ++pass) {  // as often as a run reads it
    std::vector<int64_t> lengths;
    streamed.for_each([&](int64_t length) {
      lengths.push_back(length);
      return true;
    });
    CHECK(lengths == whole.lengths);
  }
  std::vector<int64_t> first;
  streamed.for_each([&](int64_t length) {
    first.push_back(length);
    return first.size() < 5;
  });
  CHECK(first == std::vector<int64_t>(whole.lengths.begin(), whole.lengths.begin() + 5));
}

TEST_CASE("missing files and directories: an InputError naming the path", "[traces]") {
  TempDir dir;
  const std::string missing = dir.file("missing.txt");
  try {
    load_trace(missing);
    FAIL("load_trace accepted a missing file");
  } catch (const InputError& e) {
    REQUIRE(e.file() == missing);
    REQUIRE(e.line() == 0);
    REQUIRE_THAT(e.what(), Catch::Contains("no such file") && Catch::Contains("github-code-like"));
  }
  REQUIRE_THROWS_WITH(load_trace(dir.file("")), Catch::Contains("got a directory"));
  REQUIRE_THROWS_AS(
      write_protobuf_trace(load_trace("tests/traces/data/crafted.txt"), dir.file("no/such/dir.pb")),
      InputError);
}

TEST_CASE("resampled traces: the count asked, every length one of the source's, the same for the same seed",
          "[traces]") {
  TempDir dir;
  const TraceSource source(Trace{"three", "crafted", {5, 700, 90000}, 0});
  write_resampled_trace(source, 3000, 7, dir.file("a.txt"));
  write_resampled_trace(source, 3000, 7, dir.file("b.txt"));
  write_resampled_trace(source, 3000, 8, dir.file("c.txt"));
  const Trace a = load_trace(dir.file("a.txt"));
  REQUIRE(a.lengths.size() == 3000);
  std::map<int64_t, int> seen;
  for (const int64_t length : a.lengths) ++seen[length];
  REQUIRE(seen.size() == 3);
  for (const auto& [length, count] : seen) {
    CAPTURE(length);
    CHECK(count > 850);  // about 1000 each: uniform draws
    CHECK(count < 1150);
  }
  CHECK_THAT(a.description, Catch::Contains("3000 lengths drawn with replacement from three (seed 7)"));
  CHECK(load_trace(dir.file("b.txt")).lengths == a.lengths);
  CHECK(load_trace(dir.file("c.txt")).lengths != a.lengths);
  REQUIRE_THROWS_WITH(write_resampled_trace(source, 0, 7, dir.file("d.txt")),
                      "--count: expected at least one length, got 0");
  CHECK_FALSE(std::filesystem::exists(dir.file("d.txt")));
}
