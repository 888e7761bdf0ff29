// The CSV writer and reader: awkward fields survive a round trip, and a damaged file is an InputError
// naming the source and the line where the damage starts.
#include "common/csv.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/errors.hpp"

using paradyse::InputError;
namespace csv = paradyse::csv;

namespace {

using Rows = std::vector<std::vector<std::string>>;

Rows read_all(std::string_view text, std::vector<int>* lines = nullptr) {
  csv::Reader reader(text, "test.csv");
  Rows rows;
  std::vector<std::string> fields;
  while (reader.next(fields)) {
    rows.push_back(fields);
    if (lines != nullptr) lines->push_back(reader.line());
  }
  return rows;
}

InputError read_error(std::string_view text) {
  try {
    read_all(text);
  } catch (const InputError& e) {
    CHECK(e.file() == "test.csv");
    return e;
  }
  FAIL("read without an error:\n" << text);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("csv: awkward fields read back as written", "[common]") {
  const Rows written = {
      {"plain", "a,b", "say \"hi\"", "\"", ","},
      {"", "two\nlines", "crlf\r\ninside", "ends with cr\r", ""},
      {""},
      {"x", "", "", "\"\"", " spaced "},
  };
  std::string text;
  for (const auto& fields : written) text += csv::row(fields);
  std::vector<int> lines;
  CHECK(read_all(text, &lines) == written);
  // A record starts on the line after the line breaks held by the record before it.
  CHECK(lines == std::vector<int>{1, 2, 5, 6});
}

TEST_CASE("csv: a field is quoted only when it must be, its quotes doubled", "[common]") {
  CHECK(csv::field("megatron_ts") == "megatron_ts");
  CHECK(csv::field("") == "");
  CHECK(csv::field("a,b") == "\"a,b\"");
  CHECK(csv::field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv::field("two\nlines") == "\"two\nlines\"");
  CHECK(csv::field("cr\r") == "\"cr\r\"");
  CHECK(csv::row({"a", "b,c", ""}) == "a,\"b,c\",\n");
}

TEST_CASE("csv: CRLF and LF line ends read alike, and a final line end adds no record", "[common]") {
  const Rows expected = {{"id", "length"}, {"1", "5"}, {"2", "a \"b\""}};
  CHECK(read_all("id,length\n1,5\n2,\"a \"\"b\"\"\"\n") == expected);
  CHECK(read_all("id,length\r\n1,5\r\n2,\"a \"\"b\"\"\"\r\n") == expected);
  CHECK(read_all("id,length\r\n1,5\r\n2,\"a \"\"b\"\"\"") == expected);
  CHECK(read_all("").empty());
  CHECK(read_all("a\n\nb\n") == Rows{{"a"}, {""}, {"b"}});
  CHECK(read_all("a,\n") == Rows{{"a", ""}});
}

TEST_CASE("csv: a damaged file is an InputError naming the line", "[common]") {
  SECTION("a quote never closed: the line it opened on") {
    const InputError e = read_error("id,name\n1,\"open\n2,shut\n3,x\n");
    CHECK(e.line() == 2);
    CHECK_THAT(e.what(), Catch::Contains("test.csv:2") && Catch::Contains("closing quote"));
  }
  SECTION("text after a closing quote") {
    const InputError e = read_error("id,name\n1,\"two\nlines\"x\n");
    CHECK(e.line() == 3);
    CHECK_THAT(e.what(), Catch::Contains("after the closing quote"));
  }
  SECTION("a quote inside an unquoted field") {
    const InputError e = read_error("id,name\n1,ab\"c\n");
    CHECK(e.line() == 2);
    CHECK_THAT(e.what(), Catch::Contains("ab\""));
  }
}
