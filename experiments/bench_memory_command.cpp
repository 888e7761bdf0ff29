#include "experiments/bench_memory_command.hpp"

#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>

#include "common/child_processes.hpp"
#include "evaluation/compare_job.hpp"
#include "evaluation/compare_report.hpp"
#include "experiments/command_table.hpp"
#include "experiments/inputs.hpp"
#include "traces/resample.hpp"

namespace paradyse::cli {
namespace {

namespace fs = std::filesystem;

struct BenchMemoryOptions {
  evaluation::CompareJob job;
  std::string source = "github-code-like";
  std::vector<int64_t> counts{1000000, 100000000};
  uint64_t seed = 1;
};

struct Measured {
  int64_t sequences = 0;
  double wall_s = 0;
  double max_resident_bytes = 0;
};

// One compare, in a child process of its own so that its maximum resident memory is its own: the
// analytic engine, every file but per_sequence.csv written, as `compare --per-sequence none` does.
Measured measure(const evaluation::CompareJob& job, const fs::path& dir) {
  Measured measured;
  run_in_children(
      1, 1,
      [&](std::size_t) {
        const auto start = std::chrono::steady_clock::now();
        evaluation::CompareOutputs outputs((dir / "out").string(), evaluation::PerSequenceFormat::none);
        const evaluation::CompareJobResult run = evaluation::run_compare_job(job, {}, &outputs.sink());
        outputs.finish(run.result, run.description);
        const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        rusage usage{};
        getrusage(RUSAGE_SELF, &usage);
        return fmt::format("{} {} {}", run.result.policies.front().results, wall_s,
                           static_cast<double>(usage.ru_maxrss) * 1024);
      },
      [&](std::size_t, const std::string& bytes) {
        std::istringstream in(bytes);
        in >> measured.sequences >> measured.wall_s >> measured.max_resident_bytes;
      });
  return measured;
}

void run(const BenchMemoryOptions& options) {
  evaluation::CompareJob job = options.job;
  job.engine = "analytic";
  const traces::TraceSource source = traces::TraceSource::open(options.source);
  const fs::path dir = fs::temp_directory_path() / fmt::format("paradyse-bench-memory-{}", ::getpid());
  fs::create_directories(dir);
  struct RemoveDir {
    fs::path dir;
    ~RemoveDir() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } remove{dir};
  fmt::print(
      "analytic compare of {} on {} ({} policies), traces resampled from {} (seed {}), no per-sequence "
      "file\n",
      job.machine.model, job.machine.cluster, job.policies.policies, source.name(), options.seed);
  fmt::print("{:>12} {:>10} {:>14}\n", "lengths", "wall_s", "max_rss_MiB");
  std::vector<Measured> rows;
  for (const int64_t count : options.counts) {
    job.trace = (dir / "trace.txt").string();
    traces::write_resampled_trace(source, count, options.seed, job.trace);
    const Measured& m = rows.emplace_back(measure(job, dir));
    fmt::print("{:>12} {:>10.1f} {:>14.1f}\n", m.sequences, m.wall_s, m.max_resident_bytes / (1 << 20));
    std::fflush(stdout);
  }
  if (rows.size() > 1)
    fmt::print("memory from {} to {} lengths: {:.2f}x, for {:.0f}x the lengths\n", rows.front().sequences,
               rows.back().sequences, rows.back().max_resident_bytes / rows.front().max_resident_bytes,
               static_cast<double>(rows.back().sequences) / static_cast<double>(rows.front().sequences));
}

}  // namespace

void add_bench_memory_command(CLI::App& app) {
  auto options = std::make_shared<BenchMemoryOptions>();
  CLI::App* command = app.add_subcommand("bench-memory", command_description("bench-memory"));
  add_machine_options(*command, options->job.machine);
  add_policy_options(*command, options->job.policies);
  command->add_option("--trace", options->source, "the trace whose lengths are resampled: bundled or a file")
      ->capture_default_str();
  command->add_option("--counts", options->counts, "lengths of each resampled trace, comma-separated")
      ->delimiter(',')
      ->check(positive_whole_number())
      ->capture_default_str();
  command->add_option("--seed", options->seed, "seed of the resampling")->capture_default_str();
  command->callback([options] { run(*options); });
}

}  // namespace paradyse::cli
