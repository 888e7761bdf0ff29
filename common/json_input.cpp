#include "common/json_input.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>
#include <vector>

#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/limits.hpp"

namespace paradyse::json_input {
namespace {

int line_of_byte(std::string_view text, std::size_t byte) {
  int line = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i)
    if (text[i] == '\n') ++line;
  return line;
}

std::string describe(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

}  // namespace

Json parse(std::string_view text, const std::string& source, int line) {
  // The keys seen so far in each object being parsed, innermost last, with the key that leads to it.
  struct OpenObject {
    std::string path;
    std::set<std::string> keys;
    std::string last_key;
  };
  std::vector<OpenObject> open;
  const auto reject_duplicates = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw InputError(source, line, "",
                       "expected objects and arrays nested at most " + std::to_string(kMaxJsonDepth) +
                           " deep, got deeper nesting");
    if (event == Json::parse_event_t::object_start) {
      std::string path = open.empty() ? "" : open.back().path;
      if (!open.empty() && !open.back().last_key.empty())
        path += (path.empty() ? "" : ".") + open.back().last_key;
      open.push_back({std::move(path), {}, {}});
    } else if (event == Json::parse_event_t::object_end) {
      open.pop_back();
    } else if (event == Json::parse_event_t::key) {
      OpenObject& object = open.back();
      object.last_key = parsed.get<std::string>();
      if (!object.keys.insert(object.last_key).second)
        throw InputError(source, line,
                         object.path.empty() ? object.last_key : object.path + "." + object.last_key,
                         "expected each key once in an object, got it twice");
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), reject_duplicates);
  } catch (const Json::parse_error& e) {
    std::string message = e.what();
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at line ..."
    auto colon = message.find(": ");
    throw InputError(
        source, line > 0 ? line : line_of_byte(text, e.byte == 0 ? 0 : e.byte - 1), "",
        "expected valid JSON: " + (colon == std::string::npos ? message : message.substr(colon + 2)));
  } catch (const Json::out_of_range& e) {
    // "[json.exception.out_of_range.406] number overflow parsing '1e999'": no position, but the number.
    const std::string message = e.what();
    const std::size_t first = message.find('\''), last = message.rfind('\'');
    const std::string number = first < last ? message.substr(first + 1, last - first - 1) : "";
    const std::size_t at = number.empty() ? std::string_view::npos : text.find(number);
    throw InputError(
        source, line > 0 ? line : (at == std::string_view::npos ? 0 : line_of_byte(text, at)), "",
        "expected numbers a double holds, got " + (number.empty() ? message : "'" + number + "'"));
  }
}

std::string valid_utf8(std::string_view text) {
  const std::string quoted = Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
  return Json::parse(quoted).get<std::string>();
}

Json load_file(const std::string& path) {
  return parse(read_input_file(path, {.kind = "JSON", .max_bytes = kMaxSettingsFileBytes}), path);
}

Object::Object(const Json& json, std::string source, std::string prefix)
    : json_(json), source_(std::move(source)), prefix_(std::move(prefix)) {
  if (!json_.is_object())
    throw InputError(source_, 0, prefix_, "expected a JSON object, got " + describe(json_));
}

std::string Object::field(std::string_view key) const {
  return prefix_.empty() ? std::string(key) : prefix_ + "." + std::string(key);
}

void Object::fail(std::string_view key, const std::string& expected_but_got) const {
  throw InputError(source_, 0, field(key), expected_but_got);
}

void Object::require_keys(std::initializer_list<std::string_view> required,
                          std::initializer_list<std::string_view> optional) const {
  for (std::string_view key : required)
    if (!json_.contains(key)) fail(key, "missing required field");
  for (const auto& [key, value] : json_.items()) {
    bool known = false;
    for (std::string_view k : required) known = known || k == key;
    for (std::string_view k : optional) known = known || k == key;
    if (!known) {
      std::string allowed;
      for (std::string_view k : required) allowed += (allowed.empty() ? "" : ", ") + std::string(k);
      for (std::string_view k : optional) allowed += (allowed.empty() ? "" : ", ") + std::string(k);
      fail(key, "unknown field; expected one of: " + allowed);
    }
  }
}

bool Object::has(std::string_view key) const {
  return json_.contains(key) && !json_.at(std::string(key)).is_null();
}

const Json& Object::at(std::string_view key) const {
  if (!json_.contains(key)) fail(key, "missing required field");
  return json_.at(std::string(key));
}

double Object::number(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_number() || !std::isfinite(value.get<double>()))
    fail(key, "expected a number, got " + describe(value));
  return value.get<double>();
}

double Object::positive_number(std::string_view key) const {
  double value = number(key);
  if (!(value > 0)) fail(key, "expected a positive number, got " + describe(at(key)));
  return value;
}

double Object::fraction(std::string_view key) const {
  double value = number(key);
  if (value < 0 || value > 1) fail(key, "expected a number in [0, 1], got " + describe(at(key)));
  return value;
}

double Object::number_in(std::string_view key, double low, double high, std::string_view unit) const {
  const double value = number(key);
  if (value >= low && value <= high) return value;
  std::string hint;
  for (const auto& [scale, prefix] : {std::pair{1e12, "T"}, {1e9, "G"}})
    if (hint.empty() && value * scale >= low && value * scale <= high)
      hint = fmt::format(" (a figure in {}{}? the field takes {}: {:g})", prefix, unit, unit, value * scale);
  fail(key, fmt::format("expected {:g} to {:g} {}, got {}{}", low, high, unit, describe(at(key)), hint));
}

int64_t Object::positive_integer(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_number_integer() || value.get<int64_t>() <= 0)
    fail(key, "expected a positive integer, got " + describe(value));
  return value.get<int64_t>();
}

std::string Object::string(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_string()) fail(key, "expected a string, got " + describe(value));
  return value.get<std::string>();
}

bool Object::boolean(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_boolean()) fail(key, "expected true or false, got " + describe(value));
  return value.get<bool>();
}

Object Object::object(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_object()) fail(key, "expected an object, got " + describe(value));
  return Object(value, source_, field(key));
}

std::vector<std::pair<double, double>> Object::curve(std::string_view key) const {
  const Json& value = at(key);
  const std::string expected = "expected a non-empty list of [x, y] pairs with x increasing and y > 0";
  if (!value.is_array() || value.empty()) fail(key, expected + ", got " + describe(value));
  std::vector<std::pair<double, double>> points;
  for (const Json& point : value) {
    if (!point.is_array() || point.size() != 2 || !point[0].is_number() || !point[1].is_number())
      fail(key, expected + ", got element " + describe(point));
    double x = point[0].get<double>(), y = point[1].get<double>();
    if (!(y > 0) || (!points.empty() && !(x > points.back().first)))
      fail(key, expected + ", got element " + describe(point));
    points.emplace_back(x, y);
  }
  return points;
}

}  // namespace paradyse::json_input
