// Strict JSON input: what nlohmann would accept silently (a key twice, the last winning) or report
// without a place (a number past a double) is an InputError naming the file, and the field or line.
#include "common/json_input.hpp"

#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "common/limits.hpp"

using namespace paradyse;

namespace {

InputError parse_error(std::string_view text, int line = 0) {
  try {
    json_input::parse(text, "in.json", line);
  } catch (const InputError& e) {
    return e;
  }
  FAIL("parsed without an error: " << text);
  return InputError("", 0, "", "");
}

}  // namespace

TEST_CASE("json_input: a key twice in one object is refused, naming its path", "[common]") {
  const InputError top = parse_error(R"({"a": 1, "b": 2, "a": 3})");
  CHECK(top.field() == "a");
  CHECK_THAT(top.what(), Catch::Contains("in.json") && Catch::Contains("twice"));
  CHECK(parse_error(R"({"gpu": {"name": "x", "hbm": 1, "hbm": 2}})").field() == "gpu.hbm");
  CHECK(parse_error(R"({"a": {"b": {"c": 1}}, "d": {"c": 1, "c": 2}})").field() == "d.c");
  CHECK(parse_error(R"({"length": 5, "length": 6})", 7).line() == 7);  // a JSONL line
}

TEST_CASE("json_input: the same key in different objects is not a duplicate", "[common]") {
  const json_input::Json json =
      json_input::parse(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 3}, {"x": 4}], "x": 5})", "in.json");
  CHECK(json["c"][1]["x"] == 4);
  CHECK(json["x"] == 5);
}

TEST_CASE("json_input: a number past a double names the file, the line and the number", "[common]") {
  const InputError e = parse_error("{\n  \"a\": 1,\n  \"hbm_bytes\": 1e999\n}\n");
  CHECK(e.line() == 3);
  CHECK_THAT(e.what(), Catch::Contains("'1e999'"));
}

TEST_CASE("json_input: nesting past the bound is refused before it costs memory or stack", "[common]") {
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  CHECK_NOTHROW(json_input::parse(nested(kMaxJsonDepth), "in.json"));
  CHECK_THAT(parse_error(nested(kMaxJsonDepth + 1)).what(),
             Catch::StartsWith("in.json: expected objects and arrays nested at most 64 deep"));
  // Objects with keys, whose paths the duplicate check keeps: a million levels fail at once.
  std::string objects;
  for (int i = 0; i < 1000000; ++i) objects += "{\"a\":";
  CHECK(parse_error(objects + "1" + std::string(1000000, '}'), 3).line() == 3);
}

TEST_CASE("json_input: a figure outside its range names the range, and a unit slip", "[common]") {
  const json_input::Json json = json_input::parse(R"({"flops": 312, "bytes": 8e10})", "c.json");
  const json_input::Object block(json, "c.json", "gpu");
  CHECK(block.number_in("bytes", 1e8, 1e14, "bytes") == 8e10);
  try {
    block.number_in("flops", 1e9, 1e17, "FLOP/s");
    FAIL("312 FLOP/s accepted");
  } catch (const InputError& e) {
    CHECK(e.field() == "gpu.flops");
    CHECK_THAT(e.message(), Catch::Contains("expected 1e+09 to 1e+17 FLOP/s, got 312") &&
                                Catch::Contains("a figure in TFLOP/s? the field takes FLOP/s: 3.12e+14"));
  }
}
