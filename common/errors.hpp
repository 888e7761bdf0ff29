// The two error types of paradyse. InputError: anything the user can fix (a file, a flag, a preset,
// a trace); it names where the problem is and what was expected. InternalError: a broken invariant,
// thrown by PARADYSE_CHECK, which stays on in Release builds (unlike assert, which NDEBUG removes).
#pragma once

#include <stdexcept>
#include <string>

namespace paradyse {

class InputError : public std::runtime_error {
 public:
  // line 0 for formats without lines (JSON: name the field instead); field "" for line formats.
  InputError(std::string file, int line, std::string field, const std::string& expected_but_got)
      : std::runtime_error(format(file, line, field, expected_but_got)),
        file_(std::move(file)),
        line_(line),
        field_(std::move(field)),
        message_(expected_but_got) {}

  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::string& field() const { return field_; }
  const std::string& message() const { return message_; }  // what was expected, without the place

 private:
  // "models/x.json: field 'hidden_size': expected a positive integer, got -3"
  static std::string format(const std::string& file, int line, const std::string& field,
                            const std::string& message) {
    std::string text = file;
    if (line > 0) text.append(":").append(std::to_string(line));
    if (!field.empty()) text.append(text.empty() ? "" : ": ").append("field '").append(field).append("'");
    if (!text.empty()) text.append(": ");
    return text.append(message);
  }

  std::string file_;
  int line_;
  std::string field_;
  std::string message_;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace paradyse

#define PARADYSE_CHECK(cond, message)                                                          \
  do {                                                                                         \
    if (!(cond))                                                                               \
      throw ::paradyse::InternalError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                      ": check '" #cond "' failed: " + (message));             \
  } while (0)
