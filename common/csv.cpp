#include "common/csv.hpp"

#include <algorithm>

#include "common/errors.hpp"

namespace paradyse::csv {

std::string field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + '"';
}

namespace {

template <typename Fields>
std::string joined(const Fields& fields) {
  std::string text;
  bool first = true;
  for (std::string_view f : fields) {
    if (!first) text += ',';
    text += field(f);
    first = false;
  }
  return text + '\n';
}

}  // namespace

std::string row(std::initializer_list<std::string_view> fields) {
  return joined(fields);
}

std::string row(const std::vector<std::string>& fields) {
  return joined(fields);
}

Reader::Reader(std::string_view text, std::string source) : rest_(text), source_(std::move(source)) {}

bool Reader::next(std::vector<std::string>& fields) {
  if (rest_.empty()) return false;
  record_line_ = line_;
  std::size_t count = 0;
  while (true) {
    if (fields.size() <= count) fields.emplace_back();
    std::string& text = fields[count++];
    text.clear();
    if (rest_.starts_with('"')) {
      rest_.remove_prefix(1);
      read_quoted(text);
      if (!rest_.empty() && rest_.front() != ',' && rest_.front() != '\n' && !rest_.starts_with("\r\n"))
        throw InputError(source_, line_, "",
                         "expected a comma or the end of the line after the closing quote of '" + text +
                             "', got '" + std::string(rest_.substr(0, 1)) + "'");
      if (rest_.starts_with("\r\n")) rest_.remove_prefix(1);  // the '\r' of a CRLF line end
    } else {
      const std::size_t end = std::min(rest_.find_first_of(",\n\""), rest_.size());
      if (end < rest_.size() && rest_[end] == '"')
        throw InputError(source_, line_, "",
                         "expected quotes only around a whole field (a quote inside one is written twice), "
                         "got '" +
                             std::string(rest_.substr(0, end + 1)) + "'");
      text.assign(rest_.substr(0, end));
      rest_.remove_prefix(end);
      // The '\r' of a CRLF line end (a quoted field keeps its own).
      if (text.ends_with('\r') && (rest_.empty() || rest_.front() == '\n')) text.pop_back();
    }
    if (rest_.empty()) break;
    const char separator = rest_.front();
    rest_.remove_prefix(1);
    if (separator == '\n') {
      ++line_;
      break;
    }
  }
  fields.resize(count);
  return true;
}

void Reader::read_quoted(std::string& text) {
  const int opened_on = line_;
  while (true) {
    const std::size_t quote = rest_.find('"');
    if (quote == std::string_view::npos)
      throw InputError(source_, opened_on, "",
                       "expected a closing quote for the field opened on this line, got the end of the file");
    const std::string_view chunk = rest_.substr(0, quote);
    line_ += static_cast<int>(std::count(chunk.begin(), chunk.end(), '\n'));
    text.append(chunk);
    rest_.remove_prefix(quote + 1);
    if (!rest_.starts_with('"')) return;
    text += '"';  // a doubled quote is one quote
    rest_.remove_prefix(1);
  }
}

}  // namespace paradyse::csv
