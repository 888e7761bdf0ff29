// Reading input files within bounds, and making their text safe to print.
#include "common/input_file.hpp"

#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "common/printable_text.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;

namespace {

InputError bounded_read_error(const std::string& path, const InputFileBounds& bounds) {
  try {
    read_input_file(path, bounds);
  } catch (const InputError& e) {
    return e;
  }
  FAIL("read without an error: " << path);
  return InputError("", 0, "", "");
}

}  // namespace

TEST_CASE("input_file: a file within its bounds reads whole", "[common]") {
  testing::TempDir dir;
  const std::string text = "12\n345\n6789";
  CHECK(read_input_file(dir.write("t.txt", text), {.kind = "trace", .max_bytes = 11, .max_line_bytes = 4}) ==
        text);
}

TEST_CASE("input_file: past a bound, the file, the line and the bound are named", "[common]") {
  testing::TempDir dir;
  const std::string path = dir.write("t.txt", "12\n345\n6789\n");
  const InputError big = bounded_read_error(path, {.kind = "trace", .max_bytes = 11});
  CHECK(big.file() == path);
  CHECK(big.message() == "expected a trace file of at most 11 bytes, got a larger one");
  const InputError line = bounded_read_error(path, {.kind = "trace", .max_bytes = 100, .max_line_bytes = 3});
  CHECK(line.line() == 3);
  CHECK(line.message() == "expected lines of at most 3 bytes in a trace file, got a longer one");
  // A device without end: stopped at the bound, whichever comes first.
  CHECK(bounded_read_error("/dev/zero", {.kind = "model", .max_bytes = 3 << 20}).message() ==
        "expected a model file of at most 3 MiB, got a larger one");
  CHECK(bounded_read_error("/dev/zero", {.kind = "trace", .max_bytes = 1 << 30, .max_line_bytes = 1 << 10})
            .line() == 1);
  CHECK_THAT(bounded_read_error(dir.file("missing"), {.kind = "trace", .max_bytes = 1}).message(),
             Catch::Contains("no such file"));
  CHECK_THAT(bounded_read_error(dir.file(""), {.kind = "trace", .max_bytes = 1}).message(),
             Catch::Contains("a directory"));
}

TEST_CASE("printable_text: control and invalid bytes are escaped, UTF-8 text is kept", "[common]") {
  CHECK(printable_text("plain, été, 東京\tand\nlines") == "plain, été, 東京\tand\nlines");
  CHECK(printable_text(std::string("\x1b[31mred\0", 9)) == "\\x1B[31mred\\x00");
  CHECK(printable_text("a\x7f"
                       "b\r") == "a\\x7Fb\\x0D");
  CHECK(printable_text("\xff") == "\xEF\xBF\xBD");  // U+FFFD
}

TEST_CASE("input_file: lines one at a time across blocks, as the whole text splits", "[common]") {
  testing::TempDir dir;
  // 3 MiB of lines from 0 to 5,000 bytes, some ending in CRLF, the last with no line end.
  std::string text;
  std::vector<std::string> expected;
  for (int i = 0; text.size() < (3u << 20); ++i) {
    std::string line(static_cast<std::size_t>(i * 7919 % 5001), static_cast<char>('a' + i % 26));
    expected.push_back(line);
    text += line + (i % 4 == 0 ? "\r\n" : "\n");
  }
  text += "end";
  expected.push_back("end");
  const std::string path = dir.write("lines.txt", text);
  std::vector<std::string> lines;
  for_each_input_line(path, {.kind = "trace", .max_bytes = 4 << 20, .max_line_bytes = 5002},
                      [&](std::string_view line, int number) {
                        CHECK(number == static_cast<int>(lines.size()) + 1);
                        lines.emplace_back(line);
                      });
  CHECK(lines == expected);
  // The first line over a bound of 4,000 bytes ('\r' counted), named by its number.
  int longer = 0;
  while (expected[static_cast<std::size_t>(longer)].size() + (longer % 4 == 0 ? 1 : 0) <= 4000) ++longer;
  try {
    for_each_input_line(path, {.kind = "trace", .max_bytes = 4 << 20, .max_line_bytes = 4000},
                        [](std::string_view, int) {});
    FAIL("a line over the bound was read");
  } catch (const InputError& e) {
    CHECK(e.file() == path);
    CHECK(e.line() == longer + 1);
  }
}
