// CSV as RFC 4180 has it, for every CSV file paradyse reads or writes (traces, profiles, per-sequence
// tables, sweeps, op timings): one writer and one reader, so that whatever one writes the other reads
// back, names with commas, quotes or line breaks included.
//
// Writing: a field is quoted when it holds a comma, a double quote or a line break (CR or LF), and a
// double quote inside it is written twice; rows end with LF rather than RFC 4180's CRLF, as every file
// paradyse wrote before and the Unix tools that read them do. Reading takes LF and CRLF alike.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace paradyse::csv {

// `text` as one CSV field: as is, or quoted with its quotes doubled.
std::string field(std::string_view text);
// The fields as one row, comma-separated and ending with a line end.
std::string row(std::initializer_list<std::string_view> fields);
std::string row(const std::vector<std::string>& fields);

// Reads records one at a time from text held in memory (a record is a row; a quoted field may span
// lines). Strict where a guess would hide a damaged file: a quote that is never closed, text after a
// closing quote, or a quote inside an unquoted field is an InputError naming `source` and the line.
class Reader {
 public:
  // `text` must outlive the reader; `source` names it in errors (a path, or a bundled file's name).
  Reader(std::string_view text, std::string source);

  // The next record's fields into `fields` (its strings are reused); false once the text is used up.
  // An empty line is a record of one empty field; a final line end ends the last record instead of
  // starting an empty one.
  bool next(std::vector<std::string>& fields);
  // The line the last record read starts on, from 1.
  int line() const { return record_line_; }
  const std::string& source() const { return source_; }

 private:
  void read_quoted(std::string& field);

  std::string_view rest_;
  std::string source_;
  int line_ = 1;  // the line the next character of rest_ is on
  int record_line_ = 0;
};

}  // namespace paradyse::csv
