// Reading and writing the profile CSV (format in profile.hpp). The writer applies the reader's rules
// before writing, so every file paradyse writes reads back, and reads back to the same points.
#include "steps/profile.hpp"

#include <fmt/format.h>

#include "common/atomic_file.hpp"
#include "common/csv.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <ostream>
#include <sstream>
#include <string_view>
#include <tuple>

#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/limits.hpp"
#include "strategies/strategy.hpp"

namespace paradyse::steps {

namespace {

enum Column : std::size_t {
  model_column,
  cluster_column,
  degree_column,
  batch_column,
  source_column,
  strategy_column,
  recompute_column,
  seq_column,
  iteration_time_column,
  peak_memory_column,
  saved_bytes_column,
  num_columns
};

// The header row: the column names, in Column order.
const std::vector<std::string>& column_names() {
  static const std::vector<std::string> names = {"model",
                                                 "cluster",
                                                 "degree",
                                                 "batch",
                                                 "source",
                                                 "strategy",
                                                 "recompute",
                                                 "seq",
                                                 "iteration_time_s",
                                                 "peak_memory_bytes",
                                                 "saved_bytes_per_layer"};
  PARADYSE_CHECK(names.size() == num_columns, "the header names every Column");
  return names;
}

// A row as the file has it, without its line end: for error messages.
std::string row_text(const std::vector<std::string>& cells) {
  std::string text = csv::row(cells);
  text.pop_back();
  return text;
}

// Where a check failed: the file (empty when writing to a stream) and the CSV line the row is (or
// would be) on, so reader and writer report alike.
struct Place {
  const std::string& file;
  int line;
  [[noreturn]] void fail(Column column, const std::string& expected_but_got) const {
    throw InputError(file, line, std::string(column_names()[column]), expected_but_got);
  }
};

// Shortest text that parses back to the same double (std::to_chars without a precision).
std::string exact_text(double value) {
  std::array<char, 32> buffer{};
  auto [end, error] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  PARADYSE_CHECK(error == std::errc(), "to_chars of a double needs at most 24 characters");
  return std::string(buffer.data(), end);
}

// Any text but the empty one: the CSV quotes names that hold commas, quotes or line breaks.
void check_name(const Place& place, Column column, const std::string& value) {
  if (value.empty()) place.fail(column, "expected a non-empty name, got ''");
}

void check_range(const Place& place, Column column, double value, double low, double high) {
  if (!(value >= low && value <= high))
    place.fail(column,
               fmt::format("expected a number from {:g} to {:g}, got '{}'", low, high, exact_text(value)));
}

// The rules a row must follow on its own; the ones across rows (same header fields, no duplicate)
// are checked by the callers, which know the earlier rows.
void check_point(const Place& place, const ProfilePoint& point) {
  check_name(place, strategy_column, point.strategy);
  if (find_strategy(point.strategy) == nullptr)
    place.fail(strategy_column,
               "unknown strategy '" + point.strategy + "'; expected one of: " + strategy_names());
  if (!parse_recompute(point.recompute))
    place.fail(recompute_column, "expected none, selective or full, got '" + point.recompute + "'");
  if (point.seq <= 0 || point.seq > kMaxSequenceTokens)
    place.fail(seq_column, "expected a positive integer of at most " + max_sequence_tokens_text() +
                               ", got '" + std::to_string(point.seq) + "'");
  // What one training step of one length can take; far outside, a unit slip or a broken measurement
  // that would overflow the fitted polynomials.
  check_range(place, iteration_time_column, point.iteration_time_s, 1e-9, 1e6);
  check_range(place, peak_memory_column, point.peak_memory_bytes, 1, 1e15);
  check_range(place, saved_bytes_column, point.saved_bytes_per_layer, 1, 1e15);
}

void check_header_fields(const Place& place, const Profile& profile) {
  check_name(place, model_column, profile.model);
  check_name(place, cluster_column, profile.cluster);
  if (profile.degree <= 0)
    place.fail(degree_column, "expected a positive integer, got '" + std::to_string(profile.degree) + "'");
  if (profile.batch <= 0)
    place.fail(batch_column, "expected a positive integer, got '" + std::to_string(profile.batch) + "'");
  if (!is_profile_source(profile.source))
    place.fail(source_column, "expected sim, analytic or real, got '" + profile.source + "'");
}

// The (strategy, recompute, seq) seen so far, each with the line it was on: one may not come twice.
class SeenPoints {
 public:
  void add(const Place& place, const ProfilePoint& point) {
    auto [it, inserted] = line_of_.emplace(Key{point.strategy, point.recompute, point.seq}, place.line);
    if (!inserted)
      place.fail(seq_column, "expected each (strategy, recompute, seq) once, got (" + point.strategy + ", " +
                                 point.recompute + ", " + std::to_string(point.seq) +
                                 ") again (first on line " + std::to_string(it->second) + ")");
  }

 private:
  using Key = std::tuple<std::string, std::string, int64_t>;
  std::map<Key, int> line_of_;
};

int64_t parse_positive_integer(const Place& place, Column column, std::string_view text) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0)
    place.fail(column, "expected a positive integer, got '" + std::string(text) + "'");
  return value;
}

double parse_positive_number(const Place& place, Column column, std::string_view text) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || !(value > 0))
    place.fail(column, "expected a positive number, got '" + std::string(text) + "'");
  return value;
}

// Reads a data row into `profile`: the header fields from the first row, a point from every row.
void read_row(const Place& place, const std::vector<std::string>& cells, bool first_row, Profile& profile) {
  if (cells.size() < num_columns)
    place.fail(static_cast<Column>(cells.size()), "expected " + std::to_string(num_columns) +
                                                      " comma-separated values, got " +
                                                      std::to_string(cells.size()));
  if (cells.size() > num_columns)
    place.fail(saved_bytes_column, "expected the end of the row after this column, got " +
                                       std::to_string(cells.size() - num_columns) + " more value(s)");

  Profile header;
  header.model = cells[model_column];
  header.cluster = cells[cluster_column];
  const int64_t degree = parse_positive_integer(place, degree_column, cells[degree_column]);
  if (degree > std::numeric_limits<int>::max())
    place.fail(degree_column,
               "expected a parallel degree that fits an int, got '" + cells[degree_column] + "'");
  header.degree = static_cast<int>(degree);
  header.batch = parse_positive_integer(place, batch_column, cells[batch_column]);
  header.source = cells[source_column];
  check_header_fields(place, header);
  if (first_row) {
    header.points = std::move(profile.points);
    profile = std::move(header);
  } else {
    auto differs = [&](Column column, const std::string& expected, const std::string& got) {
      if (expected != got)
        place.fail(column, "expected '" + expected + "' as on the first row (one profile per file), got '" +
                               got + "'");
    };
    differs(model_column, profile.model, header.model);
    differs(cluster_column, profile.cluster, header.cluster);
    differs(degree_column, std::to_string(profile.degree), std::to_string(header.degree));
    differs(batch_column, std::to_string(profile.batch), std::to_string(header.batch));
    differs(source_column, profile.source, header.source);
  }

  ProfilePoint point;
  point.strategy = cells[strategy_column];
  point.recompute = cells[recompute_column];
  point.seq = parse_positive_integer(place, seq_column, cells[seq_column]);
  point.iteration_time_s = parse_positive_number(place, iteration_time_column, cells[iteration_time_column]);
  point.peak_memory_bytes = parse_positive_number(place, peak_memory_column, cells[peak_memory_column]);
  point.saved_bytes_per_layer = parse_positive_number(place, saved_bytes_column, cells[saved_bytes_column]);
  check_point(place, point);
  profile.points.push_back(std::move(point));
}

// `file` names the destination in errors; empty for a stream.
void write_rows(const Profile& profile, std::ostream& out, const std::string& file) {
  // Checked in full before the first byte, so a rejected profile writes nothing. A row's line counts
  // the line breaks that quoted names before it hold.
  int line = 2;
  check_header_fields(Place{file, line}, profile);
  if (profile.points.empty())
    Place{file, line}.fail(strategy_column, "expected at least one point, got none");
  std::string text = csv::row(column_names());
  const std::string degree = std::to_string(profile.degree), batch = std::to_string(profile.batch);
  SeenPoints seen;
  for (const ProfilePoint& point : profile.points) {
    const Place place{file, line};
    check_point(place, point);
    seen.add(place, point);
    const std::string row =
        csv::row({profile.model, profile.cluster, degree, batch, profile.source, point.strategy,
                  point.recompute, std::to_string(point.seq), exact_text(point.iteration_time_s),
                  exact_text(point.peak_memory_bytes), exact_text(point.saved_bytes_per_layer)});
    line += static_cast<int>(std::count(row.begin(), row.end(), '\n'));
    text += row;
  }
  out << text;
}

}  // namespace

bool is_profile_source(std::string_view text) {
  return text == "sim" || text == "analytic" || text == "real";
}

void write_profile(const Profile& profile, std::ostream& out) {
  write_rows(profile, out, "");
}

void write_profile(const Profile& profile, const std::string& path) {
  write_file_atomically(path, [&](std::ostream& out) { write_rows(profile, out, path); });
}

Profile read_profile(const std::string& path) {
  const std::string text = read_input_file(path, {.kind = "profile", .max_bytes = kMaxSettingsFileBytes});

  csv::Reader reader(text, path);
  std::vector<std::string> cells;
  const std::string header = row_text(column_names());
  if (!reader.next(cells))
    throw InputError(path, 1, "", "expected the header row '" + header + "', got an empty file");
  // Name the first column that differs: the expected name, or an extra column's own.
  const std::vector<std::string>& names = column_names();
  for (std::size_t i = 0; i < std::max(cells.size(), names.size()); ++i) {
    if (i < cells.size() && i < names.size() && cells[i] == names[i]) continue;
    throw InputError(path, 1, i < names.size() ? names[i] : cells[i],
                     "expected the header row '" + header + "', got '" + row_text(cells) + "'");
  }

  Profile profile;
  SeenPoints seen;
  while (reader.next(cells)) {
    const Place place{path, reader.line()};
    read_row(place, cells, profile.points.empty(), profile);
    seen.add(place, profile.points.back());
  }
  if (profile.points.empty())
    throw InputError(path, 2, "", "expected at least one row of points after the header, got none");
  return profile;
}

}  // namespace paradyse::steps
