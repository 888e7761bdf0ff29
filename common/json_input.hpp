// Strict reading of JSON input files: exact key sets, typed and ranged fields, and errors that name
// the file and the field (a misspelt key fails instead of silently taking a default).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace paradyse::json_input {

using Json = nlohmann::json;

// Parses text; a syntax error becomes an InputError naming `source` and the line, and so does a key
// given twice in one object (nlohmann keeps the last; which one the user meant is unknowable).
// `line`: the line of `source` that `text` is (a JSONL line), or 0 when `text` is the whole file.
Json parse(std::string_view text, const std::string& source, int line = 0);
// Reads and parses a file; a missing or unreadable file is an InputError.
Json load_file(const std::string& path);

// `text` with every byte that is not valid UTF-8 replaced by U+FFFD: text read from a user's file that
// goes into JSON output (which must be UTF-8) as it is.
std::string valid_utf8(std::string_view text);

// A JSON object together with where it came from, so that every accessor can name file and field.
class Object {
 public:
  Object(const Json& json, std::string source, std::string prefix = "");

  // Every key must be in `allowed`, and every key of `required` must be present.
  void require_keys(std::initializer_list<std::string_view> required,
                    std::initializer_list<std::string_view> optional = {}) const;

  bool has(std::string_view key) const;
  double number(std::string_view key) const;           // any finite number
  double positive_number(std::string_view key) const;  // > 0
  double fraction(std::string_view key) const;         // in [0, 1]
  // In [low, high] `unit`; a value that would be in range given in G or T of the unit says so.
  double number_in(std::string_view key, double low, double high, std::string_view unit) const;
  int64_t positive_integer(std::string_view key) const;
  std::string string(std::string_view key) const;
  bool boolean(std::string_view key) const;
  Object object(std::string_view key) const;
  // [[x0, y0], [x1, y1], ...] with x strictly increasing and y > 0.
  std::vector<std::pair<double, double>> curve(std::string_view key) const;

  const Json& json() const { return json_; }
  const std::string& source() const { return source_; }
  std::string field(std::string_view key) const;  // "gpu.hbm_bytes"
  [[noreturn]] void fail(std::string_view key, const std::string& expected_but_got) const;

 private:
  const Json& at(std::string_view key) const;

  const Json& json_;
  std::string source_;
  std::string prefix_;
};

}  // namespace paradyse::json_input
