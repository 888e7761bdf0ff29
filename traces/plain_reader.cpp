// The plain trace format: one non-negative integer per line, in dataset order; lines starting with '#'
// are headers or comments. The bundled real traces (traces/data/) come in it, their headers naming the
// trace ("# trace: ...") and its source ("# source: ..."), which become the description.
#include <string>
#include <string_view>

#include "traces/readers.hpp"

namespace paradyse::traces::detail {
namespace {

// The value of a "# key: value" header line, or "" when the line is another header or a comment.
std::string_view header_value(std::string_view line, std::string_view key) {
  line.remove_prefix(1);
  while (line.starts_with(' ')) line.remove_prefix(1);
  if (!line.starts_with(key) || !line.substr(key.size()).starts_with(':')) return {};
  line.remove_prefix(key.size() + 1);
  while (line.starts_with(' ')) line.remove_prefix(1);
  return line;
}

}  // namespace

Trace read_plain(std::string_view text, const std::string& source) {
  Trace trace;
  std::string_view what;
  std::string_view where;
  std::string_view line;
  int line_number = 0;
  while (next_line(text, line)) {
    ++line_number;
    if (line.starts_with('#')) {
      // The first of each: the headers continue a long value on '#' lines of their own.
      if (what.empty()) what = header_value(line, "trace");
      if (where.empty()) where = header_value(line, "source");
      continue;
    }
    if (line.empty()) reject_blank_line(source, line_number);
    add_sample(trace, parse_length(line, source, line_number, ""), source, line_number, "");
  }
  trace.description = std::string(what);
  if (!what.empty() && !where.empty()) trace.description.append("; source: ");
  trace.description.append(where);
  return trace;
}

}  // namespace paradyse::traces::detail
