#include "evaluation/per_sequence_file.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>

#include "common/csv.hpp"
#include "common/errors.hpp"

namespace paradyse::evaluation {

namespace fs = std::filesystem;

namespace {

constexpr const char* kHeader[] = {"policy",
                                   "index",
                                   "step",
                                   "documents",
                                   "seq",
                                   "padded_seq",
                                   "plan",
                                   "layer_switches",
                                   "predicted_time_s",
                                   "time_s",
                                   "predicted_peak_bytes",
                                   "peak_bytes",
                                   "fits",
                                   "lower_bound_s",
                                   "imbalance",
                                   "solve_s"};
// Rows are handed to the file this many bytes at a time.
constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
// CSV of numbers and repeated names compresses well at zlib's fastest level, which keeps a run of
// hundreds of millions of rows from waiting on the compressor.
constexpr const char* kGzipMode = "wb1";

[[noreturn]] void cannot_write(const fs::path& path) {
  throw InputError(path.string(), 0, "", "cannot write");
}

void append_field(std::string& row, std::string_view text) {
  row += csv::field(text);
  row += ',';
}

template <typename T>
void append_number(std::string& row, T value) {
  fmt::format_to(std::back_inserter(row), "{},", value);
}

}  // namespace

// One policy's rows: plain or gzip.
class PerSequenceFile::Part {
 public:
  Part(fs::path path, bool gzip) : path_(std::move(path)) {
    if (gzip) {
      gz_ = gzopen(path_.c_str(), kGzipMode);
      if (gz_ == nullptr) cannot_write(path_);
    } else {
      plain_ = std::fopen(path_.c_str(), "wb");
      if (plain_ == nullptr) cannot_write(path_);
    }
  }
  ~Part() {  // an unfinished file: closed, what it failed to write no longer matters
    if (gz_ != nullptr) gzclose(gz_);
    if (plain_ != nullptr) std::fclose(plain_);
  }
  void write(const std::string& text) {
    buffer_ += text;
    if (buffer_.size() >= kBufferBytes) flush();
  }
  // Closes it; then its bytes can be joined to the file.
  void close() {
    if (gz_ == nullptr && plain_ == nullptr) return;
    flush();
    const bool closed = gz_ != nullptr ? gzclose(gz_) == Z_OK : std::fclose(plain_) == 0;
    gz_ = nullptr;
    plain_ = nullptr;
    if (!closed) cannot_write(path_);
  }
  const fs::path& path() const { return path_; }

 private:
  void flush() {
    if (buffer_.empty()) return;
    const bool written = gz_ != nullptr
                             ? gzwrite(gz_, buffer_.data(), static_cast<unsigned>(buffer_.size())) ==
                                   static_cast<int>(buffer_.size())
                             : std::fwrite(buffer_.data(), 1, buffer_.size(), plain_) == buffer_.size();
    if (!written) cannot_write(path_);
    buffer_.clear();
  }
  fs::path path_;
  gzFile gz_ = nullptr;
  std::FILE* plain_ = nullptr;
  std::string buffer_;
};

PerSequenceFormat parse_per_sequence_format(const std::string& text) {
  if (text == "csv") return PerSequenceFormat::csv;
  if (text == "csv.gz") return PerSequenceFormat::csv_gz;
  if (text == "none") return PerSequenceFormat::none;
  throw InputError("--per-sequence", 0, "", "expected csv, csv.gz or none, got '" + text + "'");
}

std::string per_sequence_file_name(PerSequenceFormat format) {
  switch (format) {
    case PerSequenceFormat::csv:
      return "per_sequence.csv";
    case PerSequenceFormat::csv_gz:
      return "per_sequence.csv.gz";
    case PerSequenceFormat::none:
      return "";
  }
  return "";
}

PerSequenceFile::PerSequenceFile(fs::path dir, PerSequenceFormat format)
    : dir_(std::move(dir)), format_(format) {}

PerSequenceFile::~PerSequenceFile() {
  for (const auto& part : parts_) {
    std::error_code ignored;
    fs::remove(part->path(), ignored);
  }
}

void PerSequenceFile::start(const std::vector<std::string>& policies) {
  policies_ = policies;
  if (format_ == PerSequenceFormat::none) return;
  // The header is a part of its own, before the policies'.
  const std::string name = per_sequence_file_name(format_);
  for (std::size_t p = 0; p <= policies.size(); ++p)
    parts_.push_back(std::make_unique<Part>(dir_ / fmt::format("{}.{}.part", name, p),
                                            format_ == PerSequenceFormat::csv_gz));
  parts_.front()->write(csv::row(std::vector<std::string>(std::begin(kHeader), std::end(kHeader))));
}

void PerSequenceFile::write(std::size_t policy, const SequenceResult& s) {
  if (format_ == PerSequenceFormat::none) return;
  row_.clear();
  append_field(row_, policies_.at(policy));
  append_number(row_, s.index);
  append_number(row_, s.step);
  append_number(row_, s.documents);
  append_number(row_, s.tokens);
  append_number(row_, s.padded_tokens);
  append_field(row_, s.plan);
  append_number(row_, s.layer_switches);
  append_number(row_, s.predicted_s);
  append_number(row_, s.seconds);
  append_number(row_, s.predicted_peak_bytes);
  append_number(row_, s.peak_bytes);
  row_ += s.fits ? "1," : "0,";
  // Empty where a policy has no groups.
  if (s.lower_bound_s > 0) fmt::format_to(std::back_inserter(row_), "{}", s.lower_bound_s);
  row_ += ',';
  if (s.imbalance > 0) fmt::format_to(std::back_inserter(row_), "{}", s.imbalance);
  row_ += ',';
  if (s.solve_s > 0) fmt::format_to(std::back_inserter(row_), "{}", s.solve_s);
  row_ += '\n';
  parts_.at(policy + 1)->write(row_);
}

void PerSequenceFile::finish() {
  if (format_ == PerSequenceFormat::none) return;
  const fs::path path = dir_ / per_sequence_file_name(format_);
  std::ofstream out(path, std::ios::binary);
  for (const auto& part : parts_) {
    part->close();
    if (fs::file_size(part->path()) > 0) {  // copying nothing would mark the stream failed
      std::ifstream in(part->path(), std::ios::binary);
      out << in.rdbuf();
      if (!out) cannot_write(path);
    }
    fs::remove(part->path());
  }
  parts_.clear();
  if (!out.flush()) cannot_write(path);
}

}  // namespace paradyse::evaluation
