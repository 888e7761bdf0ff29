// The CSV trace format: a header row naming the columns, then one row per sample; the length is in the
// column ReadOptions::column names, and other columns are ignored. Kept simple on purpose: no quoting
// and no escaping (a field is the text between two commas), so a quoted length is an error, not a guess.
#include <string>
#include <string_view>
#include <vector>

#include "common/errors.hpp"
#include "traces/readers.hpp"

namespace paradyse::traces::detail {
namespace {

std::vector<std::string_view> split_fields(std::string_view row) {
  std::vector<std::string_view> fields;
  for (std::size_t comma = row.find(','); comma != std::string_view::npos; comma = row.find(',')) {
    fields.push_back(row.substr(0, comma));
    row.remove_prefix(comma + 1);
  }
  fields.push_back(row);
  return fields;
}

}  // namespace

Trace read_csv(std::string_view text, const std::string& source, const std::string& column) {
  std::string_view line;
  if (!next_line(text, line))
    throw InputError(source, 1, "", "expected a header row naming the columns, got an empty file");
  const std::vector<std::string_view> header = split_fields(line);
  std::size_t index = 0;
  while (index < header.size() && header[index] != column) ++index;
  if (index == header.size()) {
    std::string names;
    for (std::string_view name : header) names.append(names.empty() ? "" : ", ").append(quoted_text(name));
    throw InputError(source, 1, column,
                     "expected a column named '" + column + "' in the header row, got the columns " + names);
  }

  Trace trace;
  int line_number = 1;
  while (next_line(text, line)) {
    ++line_number;
    if (line.empty()) reject_blank_line(source, line_number);
    const std::vector<std::string_view> fields = split_fields(line);
    if (fields.size() != header.size())
      throw InputError(source, line_number, "",
                       "expected " + std::to_string(header.size()) +
                           " comma-separated fields as in the header row (quoting is not supported), got " +
                           std::to_string(fields.size()));
    add_sample(trace, parse_length(fields[index], source, line_number, column));
  }
  return trace;
}

}  // namespace paradyse::traces::detail
