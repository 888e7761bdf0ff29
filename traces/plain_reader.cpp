// The plain trace format: one non-negative integer per line, in dataset order; lines starting with '#'
// are headers or comments. The bundled real traces (traces/data/) come in it, their headers naming the
// trace ("# trace: ...") and its source ("# source: ..."), which become the description.
#include <string>
#include <string_view>

#include "common/limits.hpp"
#include "traces/readers.hpp"

namespace paradyse::traces::detail {
namespace {

// The value of a "# key: value" header line, or "" when the line is another header or a comment.
std::string header_value(std::string_view line, std::string_view key) {
  line.remove_prefix(1);
  while (line.starts_with(' ')) line.remove_prefix(1);
  if (!line.starts_with(key) || !line.substr(key.size()).starts_with(':')) return {};
  line.remove_prefix(key.size() + 1);
  while (line.starts_with(' ')) line.remove_prefix(1);
  return std::string(line);
}

}  // namespace

PlainLine read_plain_line(std::string_view line, int number, const std::string& source,
                          PlainHeaders& headers) {
  if (line.starts_with('#')) {
    // The first of each: the headers continue a long value on '#' lines of their own.
    if (headers.what.empty()) headers.what = header_value(line, "trace");
    if (headers.where.empty()) headers.where = header_value(line, "source");
    return {.header = true};
  }
  if (line.empty()) reject_blank_line(source, number);
  const int64_t length = parse_length(line, source, number, "");
  if (length > kMaxSequenceTokens) too_long(line, source, number, "");
  return {.length = length};
}

std::string PlainHeaders::description() const {
  std::string text = what;
  if (!what.empty() && !where.empty()) text.append("; source: ");
  return text.append(where);
}

Trace read_plain(std::string_view text, const std::string& source) {
  Trace trace;
  PlainHeaders headers;
  std::string_view line;
  int line_number = 0;
  while (next_line(text, line)) {
    const PlainLine read = read_plain_line(line, ++line_number, source, headers);
    if (!read.header) add_sample(trace, read.length, source, line_number, "");
  }
  trace.description = headers.description();
  return trace;
}

}  // namespace paradyse::traces::detail
