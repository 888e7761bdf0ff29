// Reading and writing the profile CSV (format in profile.hpp). The writer applies the reader's rules
// before writing, so every file paradyse writes reads back, and reads back to the same points.
#include "costmodel/profile.hpp"

#include "common/atomic_file.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <ostream>
#include <string_view>
#include <tuple>

#include "common/errors.hpp"
#include "strategies/strategy.hpp"

namespace paradyse::costmodel {

namespace {

constexpr const char* profile_csv_header =
    "model,cluster,degree,batch,source,strategy,recompute,seq,iteration_time_s,peak_memory_bytes,"
    "saved_bytes_per_layer";

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

bool is_source(std::string_view text) {
  return text == "sim" || text == "analytic" || text == "real";
}

std::vector<std::string_view> split_row(std::string_view line) {
  std::vector<std::string_view> cells;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = line.find(',', start);
    cells.push_back(
        line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return cells;
    start = comma + 1;
  }
}

// The column names, in order: the header row split at its commas.
const std::vector<std::string_view>& column_names() {
  static const std::vector<std::string_view> names = split_row(profile_csv_header);
  PARADYSE_CHECK(names.size() == num_columns, "the header names every Column");
  return names;
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

void check_name(const Place& place, Column column, const std::string& value) {
  if (value.empty() || value.find_first_of(",\"\r\n") != std::string::npos)
    place.fail(column,
               "expected a non-empty name without commas, quotes or line breaks, got '" + value + "'");
}

void check_positive(const Place& place, Column column, double value) {
  if (!std::isfinite(value) || !(value > 0))
    place.fail(column, "expected a positive number, got '" + exact_text(value) + "'");
}

// The rules a row must follow on its own; the ones across rows (same header fields, no duplicate)
// are checked by the callers, which know the earlier rows.
void check_point(const Place& place, const ProfilePoint& point) {
  check_name(place, strategy_column, point.strategy);
  if (!parse_recompute(point.recompute))
    place.fail(recompute_column, "expected none, selective or full, got '" + point.recompute + "'");
  if (point.seq <= 0)
    place.fail(seq_column, "expected a positive integer, got '" + std::to_string(point.seq) + "'");
  check_positive(place, iteration_time_column, point.iteration_time_s);
  check_positive(place, peak_memory_column, point.peak_memory_bytes);
  check_positive(place, saved_bytes_column, point.saved_bytes_per_layer);
}

void check_header_fields(const Place& place, const Profile& profile) {
  check_name(place, model_column, profile.model);
  check_name(place, cluster_column, profile.cluster);
  if (profile.degree <= 0)
    place.fail(degree_column, "expected a positive integer, got '" + std::to_string(profile.degree) + "'");
  if (profile.batch <= 0)
    place.fail(batch_column, "expected a positive integer, got '" + std::to_string(profile.batch) + "'");
  if (!is_source(profile.source))
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
void read_row(const Place& place, const std::vector<std::string_view>& cells, bool first_row,
              Profile& profile) {
  if (cells.size() < num_columns)
    place.fail(static_cast<Column>(cells.size()), "expected " + std::to_string(num_columns) +
                                                      " comma-separated values, got " +
                                                      std::to_string(cells.size()));
  if (cells.size() > num_columns)
    place.fail(saved_bytes_column, "expected the end of the row after this column, got " +
                                       std::to_string(cells.size() - num_columns) + " more value(s)");

  Profile header;
  header.model = std::string(cells[model_column]);
  header.cluster = std::string(cells[cluster_column]);
  const int64_t degree = parse_positive_integer(place, degree_column, cells[degree_column]);
  if (degree > std::numeric_limits<int>::max())
    place.fail(degree_column, "expected a parallel degree that fits an int, got '" +
                                  std::string(cells[degree_column]) + "'");
  header.degree = static_cast<int>(degree);
  header.batch = parse_positive_integer(place, batch_column, cells[batch_column]);
  header.source = std::string(cells[source_column]);
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
  point.strategy = std::string(cells[strategy_column]);
  point.recompute = std::string(cells[recompute_column]);
  point.seq = parse_positive_integer(place, seq_column, cells[seq_column]);
  point.iteration_time_s = parse_positive_number(place, iteration_time_column, cells[iteration_time_column]);
  point.peak_memory_bytes = parse_positive_number(place, peak_memory_column, cells[peak_memory_column]);
  point.saved_bytes_per_layer = parse_positive_number(place, saved_bytes_column, cells[saved_bytes_column]);
  check_point(place, point);
  profile.points.push_back(std::move(point));
}

// `file` names the destination in errors; empty for a stream.
void write_rows(const Profile& profile, std::ostream& out, const std::string& file) {
  // Checked in full before the first byte, so a rejected profile writes nothing.
  check_header_fields(Place{file, 2}, profile);
  if (profile.points.empty()) Place{file, 2}.fail(strategy_column, "expected at least one point, got none");
  SeenPoints seen;
  for (std::size_t i = 0; i < profile.points.size(); ++i) {
    const Place place{file, static_cast<int>(i) + 2};
    check_point(place, profile.points[i]);
    seen.add(place, profile.points[i]);
  }
  out << profile_csv_header << '\n';
  const std::string fixed = profile.model + ',' + profile.cluster + ',' + std::to_string(profile.degree) +
                            ',' + std::to_string(profile.batch) + ',' + profile.source + ',';
  for (const ProfilePoint& point : profile.points)
    out << fixed << point.strategy << ',' << point.recompute << ',' << point.seq << ','
        << exact_text(point.iteration_time_s) << ',' << exact_text(point.peak_memory_bytes) << ','
        << exact_text(point.saved_bytes_per_layer) << '\n';
}

}  // namespace

void write_profile(const Profile& profile, std::ostream& out) {
  write_rows(profile, out, "");
}

void write_profile(const Profile& profile, const std::string& path) {
  write_file_atomically(path, [&](std::ostream& out) { write_rows(profile, out, path); });
}

Profile read_profile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, 0, "", "cannot open the file for reading");

  std::string line;
  int line_number = 1;
  if (!std::getline(in, line))
    throw InputError(path, 1, "",
                     std::string("expected the header row '") + profile_csv_header + "', got an empty file");
  if (!line.empty() && line.back() == '\r') line.pop_back();  // a file saved with CRLF line ends
  // Name the first column that differs: the expected name, or an extra column's own.
  const std::vector<std::string_view> header = split_row(line);
  const std::vector<std::string_view>& names = column_names();
  for (std::size_t i = 0; i < std::max(header.size(), names.size()); ++i) {
    if (i < header.size() && i < names.size() && header[i] == names[i]) continue;
    const std::string column(i < names.size() ? names[i] : header[i]);
    throw InputError(path, 1, column,
                     std::string("expected the header row '") + profile_csv_header + "', got '" + line + "'");
  }

  Profile profile;
  SeenPoints seen;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const Place place{path, line_number};
    read_row(place, split_row(line), profile.points.empty(), profile);
    seen.add(place, profile.points.back());
  }
  if (in.bad()) throw InputError(path, line_number, "", "read error");
  if (profile.points.empty())
    throw InputError(path, 2, "", "expected at least one row of points after the header, got none");
  return profile;
}

}  // namespace paradyse::costmodel
