// `paradyse trace list|stats|convert|resample`: what the length traces hold before a run trains them.
// The work is traces/'s (loading, statistics, the Protobuf form, resampling); this file parses flags
// and prints.
#include "experiments/trace_command.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/errors.hpp"
#include "experiments/inputs.hpp"
#include "traces/resample.hpp"
#include "traces/stats.hpp"
#include "traces/trace.hpp"

namespace paradyse::cli {
namespace {

struct TraceOptions {
  std::string input;
  std::string out;
  traces::ReadOptions read;
  bool json = false;
  int64_t count = 0;  // resample
  uint64_t seed = 0;
};

void list() {
  struct Row {
    traces::Trace trace;
    traces::TraceStats stats;
  };
  std::vector<Row> rows;
  for (const std::string& name : traces::bundled_trace_names()) {
    traces::Trace trace = traces::load_trace(name);
    traces::TraceStats stats = traces::trace_stats(trace.lengths);
    rows.push_back({std::move(trace), std::move(stats)});
  }
  fmt::print("{:<17} {:>8} {:>8} {:>10}  {}\n", "name", "samples", "median", "max", "description");
  for (const Row& row : rows)
    fmt::print("{:<17} {:>8} {:>8} {:>10}  {}\n", row.trace.name, row.stats.count, row.stats.median,
               row.stats.max, row.trace.description);
}

nlohmann::ordered_json stats_json(const traces::Trace& trace, const traces::TraceStats& stats) {
  nlohmann::ordered_json j;
  j["name"] = trace.name;
  j["count"] = stats.count;
  j["total_tokens"] = stats.total_tokens;
  j["mean"] = stats.mean;
  j["min"] = stats.min;
  j["median"] = stats.median;
  j["p90"] = stats.p90;
  j["p99"] = stats.p99;
  j["max"] = stats.max;
  j["empty_samples"] = trace.empty_samples;
  j["buckets"] = nlohmann::ordered_json::array();
  for (const traces::Bucket& bucket : stats.buckets)
    j["buckets"].push_back({{"label", bucket.label}, {"count", bucket.count}, {"fraction", bucket.fraction}});
  return j;
}

void stats(const TraceOptions& options) {
  const traces::Trace trace = traces::load_trace(options.input, options.read);
  const traces::TraceStats stats = traces::trace_stats(trace.lengths);
  if (options.json) {
    std::cout << stats_json(trace, stats).dump(2) << "\n";
    return;
  }
  fmt::print("{}: {}\n", trace.name, trace.description);
  fmt::print("samples       {:>12}", stats.count);
  if (trace.empty_samples > 0) fmt::print("  ({} more skipped as empty)", trace.empty_samples);
  fmt::print("\ntotal tokens  {:>12}\n", stats.total_tokens);
  fmt::print("mean          {:>12.1f}\n", stats.mean);
  fmt::print("min           {:>12}\n", stats.min);
  fmt::print("median        {:>12}\n", stats.median);
  fmt::print("p90           {:>12}\n", stats.p90);
  fmt::print("p99           {:>12}\n", stats.p99);
  fmt::print("max           {:>12}\n", stats.max);
  fmt::print("{:<9} {:>10} {:>8}\n", "length", "samples", "share");
  for (const traces::Bucket& bucket : stats.buckets)
    fmt::print("{:<9} {:>10} {:>6.1f} %\n", bucket.label, bucket.count, bucket.fraction * 100);
}

void convert(const TraceOptions& options) {
  // Checked before loading, so a wrong name costs no work; a file not ending in .pb would load back as
  // a plain trace and fail.
  if (std::filesystem::path(options.out).extension() != ".pb")
    throw InputError(options.out, 0, "",
                     "expected an output file name ending in .pb, got '" + options.out + "'");
  check_output_path(options.out, OutputKind::file, "out");
  const traces::Trace trace = traces::load_trace(options.input, options.read);
  traces::write_protobuf_trace(trace, options.out);
  fmt::print("wrote {} ({} samples", options.out, trace.lengths.size());
  if (trace.empty_samples > 0) fmt::print(", {} more skipped as empty", trace.empty_samples);
  fmt::print(")\n");
}

}  // namespace

void add_trace_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "trace",
      "Length traces: the bundled real ones (Linux source code and GRCh38 genes), statistics of any trace "
      "with the paper's length buckets, conversion to the compact Protobuf form, and resampling into "
      "longer traces of the same length distribution. A trace is a bundled "
      "name or a file: .csv (a header row; --column), .jsonl (--field), .pb, or plain text (one length per "
      "line, '#' lines are headers). Empty samples (length 0) are skipped and counted.");
  command->require_subcommand(1);

  command->add_subcommand("list", "the bundled traces: samples, median and max length, where they come from")
      ->callback(list);

  auto stats_options = std::make_shared<TraceOptions>();
  CLI::App* stats_command = command->add_subcommand(
      "stats",
      "count, total tokens, mean, min, median, p90, p99 and max (nearest-rank percentiles), and the share of "
      "samples in each of the paper's length buckets (K = 1024 tokens)");
  stats_command->add_option("trace", stats_options->input, "a bundled trace name or a trace file")
      ->required();
  const TraceFormatFlags stats_formats =
      add_trace_format_options(*stats_command, stats_options->read.column, stats_options->read.field);
  stats_command->add_flag("--json", stats_options->json, "print JSON instead of a table");
  stats_command->callback([stats_options, stats_formats] {
    stats_formats.check(stats_options->input);
    stats(*stats_options);
  });

  auto convert_options = std::make_shared<TraceOptions>();
  CLI::App* convert_command =
      command->add_subcommand("convert", "write a trace in the Protobuf form (traces/trace.proto)");
  convert_command->add_option("trace", convert_options->input, "a bundled trace name or a trace file")
      ->required();
  convert_command->add_option("out", convert_options->out, "the file to write, ending in .pb")->required();
  const TraceFormatFlags convert_formats =
      add_trace_format_options(*convert_command, convert_options->read.column, convert_options->read.field);
  convert_command->callback([convert_options, convert_formats] {
    convert_formats.check(convert_options->input);
    convert(*convert_options);
  });

  auto resample_options = std::make_shared<TraceOptions>();
  CLI::App* resample_command = command->add_subcommand(
      "resample",
      "write a plain trace of --count lengths drawn uniformly, with replacement, from a trace's samples: "
      "its length distribution at any size, for runs longer than the trace");
  resample_command->add_option("trace", resample_options->input, "a bundled trace name or a trace file")
      ->required();
  resample_command->add_option("out", resample_options->out, "the plain trace file to write")->required();
  resample_command->add_option("--count", resample_options->count, "lengths to draw")
      ->required()
      ->check(positive_whole_number());
  resample_command->add_option("--seed", resample_options->seed, "seed of the draws")->capture_default_str();
  const TraceFormatFlags resample_formats = add_trace_format_options(
      *resample_command, resample_options->read.column, resample_options->read.field);
  resample_command->callback([resample_options, resample_formats] {
    const TraceOptions& options = *resample_options;
    resample_formats.check(options.input);
    const traces::TraceSource source = traces::TraceSource::open(options.input, options.read);
    traces::write_resampled_trace(source, options.count, options.seed, options.out);
    fmt::print("wrote {}: {} lengths drawn from {} ({} samples, seed {})\n", options.out, options.count,
               source.name(), source.samples(), options.seed);
  });
}

}  // namespace paradyse::cli
