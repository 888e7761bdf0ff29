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
