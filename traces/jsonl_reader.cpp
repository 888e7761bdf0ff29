// The JSONL trace format: one JSON object per line, the length in the field ReadOptions::field names
// (other fields are ignored), as datasets export per-sample metadata.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/errors.hpp"
#include "common/json_input.hpp"
#include "common/limits.hpp"
#include "traces/readers.hpp"

namespace paradyse::traces::detail {

Trace read_jsonl(std::string_view text, const std::string& source, const std::string& field) {
  Trace trace;
  std::string_view line;
  int line_number = 0;
  while (next_line(text, line)) {
    ++line_number;
    if (line.empty()) reject_blank_line(source, line_number);
    const bool valid = json_input::Json::accept(line);
    const json_input::Json object = valid ? json_input::parse(line, source, line_number) : nullptr;
    if (!object.is_object())
      throw InputError(source, line_number, "",
                       "expected one JSON object per line, got " + quoted_text(line));
    const auto value = object.find(field);
    if (value == object.end()) {
      std::string keys;
      for (const auto& item : object.items())
        keys.append(keys.empty() ? "" : ", ").append(quoted_text(item.key()));
      throw InputError(
          source, line_number, field,
          "expected the field in every object, got " + (keys.empty() ? "no fields" : "the fields " + keys));
    }
    // nlohmann reads non-negative integers as unsigned: negative, fractional, string and boolean values
    // all fail this test.
    if (!value->is_number_unsigned())
      throw InputError(source, line_number, field,
                       "expected a non-negative whole number of tokens, got " + quoted_text(value->dump()));
    if (value->get<uint64_t>() > static_cast<uint64_t>(kMaxSequenceTokens))
      too_long(value->dump(), source, line_number, field);
    add_sample(trace, static_cast<int64_t>(value->get<uint64_t>()), source, line_number, field);
  }
  return trace;
}

}  // namespace paradyse::traces::detail
