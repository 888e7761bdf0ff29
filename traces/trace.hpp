// Length traces: one token count per training sample, in dataset order. This is what the selector and
// the simulator consume; where the numbers come from (a bundled real trace or a user's file in one of
// four formats) ends here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace paradyse::traces {

struct Trace {
  std::string name;              // the bundled name, or the path it was read from
  std::string description;       // one line: where the samples come from
  std::vector<int64_t> lengths;  // tokens per sample, dataset order, zero-length samples removed
  int64_t empty_samples = 0;     // zero-length samples (empty files in the real traces), skipped
};

struct ReadOptions {
  std::string column = "length";  // CSV: the column holding the length (a header row is required)
  std::string field = "length";   // JSONL: the field holding the length
};

// A bundled trace name (bundled_trace_names(); a bundled name wins over a file of the same name), or a
// file whose format its extension chooses:
//   .csv    RFC 4180 (quoted fields may hold commas, quotes and line breaks), a header row naming the
//           columns, every row as many fields as the header;
//   .jsonl  one JSON object per line;
//   .pb     the Protobuf message of traces/trace.proto (name and description come from the message);
//   other   plain: one non-negative integer per line, lines starting with '#' are headers or comments.
// In every format a zero length is an empty sample (counted, skipped); blank lines are errors except a
// final newline; CRLF line ends are accepted. A bad file is an InputError naming the file, the line
// (1-based; 0 when the problem is the whole file) and, for CSV and JSONL, the column or field.
Trace load_trace(const std::string& name_or_path, const ReadOptions& options = {});

std::vector<std::string> bundled_trace_names();  // sorted

// A trace read sample by sample, as often as a run needs, without holding its lengths where it can: a
// file in the plain format is checked whole when opened (every error load_trace would give, by line)
// and read again, a block at a time, by each for_each; the bundled traces and the other formats are
// loaded whole (load_trace).
class TraceSource {
 public:
  static TraceSource open(const std::string& name_or_path, const ReadOptions& options = {});
  explicit TraceSource(Trace trace);  // lengths in memory
  const std::string& name() const { return trace_.name; }
  const std::string& description() const { return trace_.description; }
  int64_t samples() const { return samples_; }  // non-empty ones
  int64_t empty_samples() const { return trace_.empty_samples; }
  // Every non-empty sample's length in dataset order, until `length` returns false.
  void for_each(const std::function<bool(int64_t)>& length) const;

 private:
  TraceSource() = default;
  Trace trace_;                // its lengths only when not streamed
  std::string streamed_path_;  // "" when in memory
  int64_t samples_ = 0;
};

// Writes the Protobuf form (traces/trace.proto) through path + ".partial", renamed into place at the
// end, so that an interrupted write never leaves a truncated trace under the final name.
void write_protobuf_trace(const Trace& trace, const std::string& path);

}  // namespace paradyse::traces
