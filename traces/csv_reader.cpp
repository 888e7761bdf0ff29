// The CSV trace format: a header row naming the columns, then one row per sample; the length is in the
// column ReadOptions::column names, and other columns are ignored. Fields are RFC 4180 (common/csv.hpp),
// so another column may hold a quoted path with commas, and a quoted length reads as the number inside.
#include <string>
#include <string_view>
#include <vector>

#include "common/csv.hpp"
#include "common/errors.hpp"
#include "traces/readers.hpp"

namespace paradyse::traces::detail {

Trace read_csv(std::string_view text, const std::string& source, const std::string& column) {
  csv::Reader reader(text, source);
  std::vector<std::string> header;
  if (!reader.next(header))
    throw InputError(source, 1, "", "expected a header row naming the columns, got an empty file");
  std::size_t index = 0;
  while (index < header.size() && header[index] != column) ++index;
  if (index == header.size()) {
    std::string names;
    for (std::string_view name : header) names.append(names.empty() ? "" : ", ").append(quoted_text(name));
    throw InputError(source, 1, column,
                     "expected a column named '" + column + "' in the header row, got the columns " + names);
  }
  for (std::size_t other = index + 1; other < header.size(); ++other)
    if (header[other] == column)
      throw InputError(source, 1, column,
                       "expected one column of that name in the header row, got columns " +
                           std::to_string(index + 1) + " and " + std::to_string(other + 1));

  Trace trace;
  std::vector<std::string> fields;
  while (reader.next(fields)) {
    if (fields.size() == 1 && fields[0].empty()) reject_blank_line(source, reader.line());
    if (fields.size() != header.size())
      throw InputError(source, reader.line(), "",
                       "expected " + std::to_string(header.size()) +
                           " comma-separated fields as in the header row, got " +
                           std::to_string(fields.size()));
    add_sample(trace, parse_length(fields[index], source, reader.line(), column), source, reader.line(),
               column);
  }
  return trace;
}

}  // namespace paradyse::traces::detail
