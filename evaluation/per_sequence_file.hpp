// per_sequence.csv: every policy's result for every micro-batch, written as the run makes them, policy
// by policy in the file (each policy's rows in run order), plain or gzip-compressed, or not at all.
// Each policy's rows go to a file of their own while the run goes on (a run interleaves its policies
// a chunk of steps at a time); finish() joins them behind the header. A gzip file may hold several
// members, one after another (RFC 1952), so the compressed parts join by concatenation, as `zcat`,
// Python's gzip and pandas read them.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "evaluation/compare_result.hpp"

namespace paradyse::evaluation {

enum class PerSequenceFormat { csv, csv_gz, none };

// "csv", "csv.gz" or "none"; InputError naming --per-sequence otherwise.
PerSequenceFormat parse_per_sequence_format(const std::string& text);
// The file's name in an output folder: "per_sequence.csv", "per_sequence.csv.gz", or "" for none.
std::string per_sequence_file_name(PerSequenceFormat format);

class PerSequenceFile final : public SequenceSink {
 public:
  // Writes into `dir` (which exists), per_sequence_file_name(format).
  PerSequenceFile(std::filesystem::path dir, PerSequenceFormat format);
  ~PerSequenceFile() override;
  void start(const std::vector<std::string>& policies) override;
  void write(std::size_t policy, const SequenceResult& result) override;
  // The file, whole; an InputError naming it when it cannot be written.
  void finish();

 private:
  class Part;
  std::filesystem::path dir_;
  PerSequenceFormat format_;
  std::vector<std::string> policies_;
  std::vector<std::unique_ptr<Part>> parts_;
  std::string row_;
};

}  // namespace paradyse::evaluation
