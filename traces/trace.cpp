// Loading a trace by bundled name or by file, and the pieces every reader shares (line splitting, the
// length syntax, empty samples). The bundled traces are embedded at build time (cmake/EmbedFiles.cmake),
// so the program needs no data directory at run time.
#include "traces/trace.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <string_view>

#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/json_input.hpp"
#include "common/limits.hpp"
#include "common/printable_text.hpp"
#include "traces/readers.hpp"

namespace paradyse::traces {
namespace {

struct BundledTrace {
  std::string_view name;
  std::string_view file;  // stem of the file under traces/data/
  // Tokens of the bundled view = ceil(file length / divisor): 3 gives the non-overlapping 3-mer
  // tokenization the paper used for GRCh38 (its file holds nucleotides, one token each).
  int64_t divisor;
  std::string_view view;  // appended to the file's description when the view differs from the file
};

// Sorted by name.
constexpr BundledTrace bundled_traces[] = {
    {"github-code-like", "github-code-like", 1, ""},
    {"grch38", "grch38-gene-spans", 3, "3-mer tokens: nucleotides / 3, rounded up"},
    {"grch38-char", "grch38-gene-spans", 1, "1 token per nucleotide"},
    {"repo-level-code", "repo-level-code", 1, ""},
};

std::string bundled_names_text() {
  std::string text;
  for (const BundledTrace& bundled : bundled_traces)
    text.append(text.empty() ? "" : ", ").append(bundled.name);
  return text;
}

Trace load_bundled(const BundledTrace& bundled) {
  const std::string source = "traces/data/" + std::string(bundled.file) + ".txt";
  const auto& files = bundled_trace_files();
  const auto file = files.find(bundled.file);
  PARADYSE_CHECK(file != files.end(), "bundled trace file " + source + " is not embedded");
  Trace trace = detail::read_plain(file->second, source);
  trace.name = bundled.name;
  if (bundled.divisor != 1)
    for (int64_t& length : trace.lengths) length = (length + bundled.divisor - 1) / bundled.divisor;
  if (!bundled.view.empty()) trace.description.append("; ").append(bundled.view);
  detail::require_samples(trace, source);
  return trace;
}

void check_trace_file(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error))
    throw InputError(
        path, 0, "",
        "expected a trace file or a bundled trace name (" + bundled_names_text() + "), got no such file");
}

// A trace read from `path` is named by its file where the file names it not, and described by the
// file's name where it says nothing of itself.
void name_file_trace(Trace& trace, const std::string& path) {
  if (trace.name.empty()) trace.name = path;
  if (trace.description.empty()) trace.description = std::filesystem::path(path).filename().string();
  // Reports and JSON outputs carry both: a header in Latin-1 must not fail them.
  trace.name = json_input::valid_utf8(trace.name);
  trace.description = json_input::valid_utf8(trace.description);
}

std::string read_file(const std::string& path) {
  check_trace_file(path);
  // A .pb trace is binary: its bytes have no lines.
  const bool lines = std::filesystem::path(path).extension() != ".pb";
  return read_input_file(
      path,
      {.kind = "trace", .max_bytes = kMaxTraceFileBytes, .max_line_bytes = lines ? kMaxTraceLineBytes : 0});
}

}  // namespace

Trace load_trace(const std::string& name_or_path, const ReadOptions& options) {
  for (const BundledTrace& bundled : bundled_traces)
    if (bundled.name == name_or_path) return load_bundled(bundled);

  const std::string file = read_file(name_or_path);
  const std::filesystem::path path(name_or_path);
  const std::string extension = path.extension().string();
  // Editors on Windows start UTF-8 text with a byte-order mark: every text format skips it alike.
  std::string_view text = file;
  if (extension != ".pb" && text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  Trace trace = extension == ".csv"     ? detail::read_csv(text, name_or_path, options.column)
                : extension == ".jsonl" ? detail::read_jsonl(text, name_or_path, options.field)
                : extension == ".pb"    ? detail::read_protobuf(file, name_or_path)
                                        : detail::read_plain(text, name_or_path);
  name_file_trace(trace, name_or_path);
  detail::require_samples(trace, name_or_path);
  return trace;
}

namespace {

bool streams(const std::string& name_or_path) {
  for (const BundledTrace& bundled : bundled_traces)
    if (bundled.name == name_or_path) return false;
  const std::string extension = std::filesystem::path(name_or_path).extension().string();
  return extension != ".csv" && extension != ".jsonl" && extension != ".pb";
}

// Every line of a plain trace file: headers into `headers`, each length (0 for an empty sample) to
// `length` until it returns false.
void read_plain_file(const std::string& path, detail::PlainHeaders& headers,
                     const std::function<bool(int64_t)>& length) {
  check_trace_file(path);
  struct Stop {};  // `length` asked for no more
  try {
    for_each_input_line(
        path, {.kind = "trace", .max_bytes = kMaxTraceFileBytes, .max_line_bytes = kMaxTraceLineBytes},
        [&](std::string_view line, int number) {
          if (number == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
          const detail::PlainLine read = detail::read_plain_line(line, number, path, headers);
          if (!read.header && !length(read.length)) throw Stop{};
        });
  } catch (const Stop&) {
  }
}

}  // namespace

TraceSource TraceSource::open(const std::string& name_or_path, const ReadOptions& options) {
  if (!streams(name_or_path)) return TraceSource(load_trace(name_or_path, options));
  TraceSource source;
  source.streamed_path_ = name_or_path;
  detail::PlainHeaders headers;
  read_plain_file(name_or_path, headers, [&](int64_t length) {
    if (length == 0)
      ++source.trace_.empty_samples;
    else
      ++source.samples_;
    return true;
  });
  source.trace_.description = headers.description();
  name_file_trace(source.trace_, name_or_path);
  if (source.samples_ == 0) detail::require_samples(source.trace_, name_or_path);
  return source;
}

TraceSource::TraceSource(Trace trace)
    : trace_(std::move(trace)), samples_(static_cast<int64_t>(trace_.lengths.size())) {}

void TraceSource::for_each(const std::function<bool(int64_t)>& length) const {
  if (streamed_path_.empty()) {
    for (const int64_t value : trace_.lengths)
      if (!length(value)) return;
    return;
  }
  detail::PlainHeaders headers;
  read_plain_file(streamed_path_, headers, [&](int64_t value) { return value == 0 || length(value); });
}

std::vector<std::string> bundled_trace_names() {
  std::vector<std::string> names;
  for (const BundledTrace& bundled : bundled_traces) names.emplace_back(bundled.name);
  PARADYSE_CHECK(std::is_sorted(names.begin(), names.end()), "bundled_traces must be sorted by name");
  return names;
}

namespace detail {

bool next_line(std::string_view& rest, std::string_view& line) {
  if (rest.empty()) return false;
  const std::size_t end = std::min(rest.find('\n'), rest.size());
  line = rest.substr(0, end);
  rest.remove_prefix(std::min(end + 1, rest.size()));
  if (line.ends_with('\r')) line.remove_suffix(1);
  return true;
}

void reject_blank_line(const std::string& source, int line) {
  throw InputError(source, line, "", "expected a sample on every line, got a blank line");
}

int64_t parse_length(std::string_view text, const std::string& source, int line, const std::string& field) {
  int64_t value = 0;
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(text.data(), last, value);
  // from_chars takes a leading '-'; checking the first character also turns "-0" away.
  const bool whole = !text.empty() && text.front() != '-' && end == last;
  if (whole && error == std::errc::result_out_of_range) too_long(text, source, line, field);
  if (!whole || error != std::errc{})
    throw InputError(source, line, field,
                     "expected a non-negative whole number of tokens, got " + quoted_text(text));
  return value;
}

void too_long(std::string_view text, const std::string& source, int line, const std::string& field) {
  throw InputError(
      source, line, field,
      "expected a length of at most " + max_sequence_tokens_text() + ", got " + quoted_text(text));
}

void add_sample(Trace& trace, int64_t length, const std::string& source, int line, const std::string& field) {
  if (length > kMaxSequenceTokens) too_long(std::to_string(length), source, line, field);
  if (length == 0)
    ++trace.empty_samples;
  else
    trace.lengths.push_back(length);
}

void require_samples(const Trace& trace, const std::string& source) {
  if (trace.lengths.empty())
    throw InputError(source, 0, "",
                     "expected at least one sample longer than 0 tokens, got " +
                         (trace.empty_samples == 0 ? std::string("none")
                                                   : std::to_string(trace.empty_samples) + " empty samples"));
}

std::string quoted_text(std::string_view text) {
  constexpr std::size_t shown = 40;
  if (text.size() <= shown) return "'" + printable_text(text) + "'";
  return "'" + printable_text(text.substr(0, shown)) + "...' (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace detail
}  // namespace paradyse::traces
