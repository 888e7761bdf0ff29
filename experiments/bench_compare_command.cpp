#include "experiments/bench_compare_command.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "evaluation/compare_job.hpp"
#include "evaluation/compare_report.hpp"
#include "experiments/command_table.hpp"
#include "experiments/inputs.hpp"

namespace paradyse::cli {
namespace {

namespace fs = std::filesystem;

struct BenchCompareOptions {
  evaluation::CompareJob job;
  int jobs = 1;
};

struct TimedRun {
  double wall_s = 0;
  std::string outputs;  // per_sequence.csv and summary.json, as written
};

// One compare, timed as `paradyse compare` times itself: from reading the trace to the written files.
TimedRun timed_compare(evaluation::CompareJob job, int jobs) {
  job.jobs = jobs;
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("paradyse-bench-compare-{}-{}", ::getpid(), jobs);
  fs::remove_all(dir);
  const auto start = std::chrono::steady_clock::now();
  {
    evaluation::CompareOutputs outputs(dir.string());
    const evaluation::CompareJobResult run = evaluation::run_compare_job(job, {}, &outputs.sink());
    outputs.finish(run.result, run.description);
  }
  TimedRun timed{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), ""};
  for (const char* file : {"per_sequence.csv", "summary.json"}) {
    std::ifstream in(dir / file, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    timed.outputs += bytes.str();
  }
  fs::remove_all(dir);
  return timed;
}

void run(const BenchCompareOptions& options) {
  const evaluation::CompareJob& job = options.job;
  fmt::print("compare of {} on {} over {} ({} order), simulator engine: wall time with --jobs {} and 1\n",
             job.machine.model, job.machine.cluster, job.trace, job.order, options.jobs);
  const TimedRun parallel = timed_compare(job, options.jobs);
  fmt::print("jobs {:>3}: {:8.1f} s\n", options.jobs, parallel.wall_s);
  const TimedRun serial = timed_compare(job, 1);
  fmt::print("jobs {:>3}: {:8.1f} s\n", 1, serial.wall_s);
  fmt::print("speedup over one process: {:.2f}x\n", serial.wall_s / parallel.wall_s);
  fmt::print("per_sequence.csv and summary.json identical: {}\n",
             parallel.outputs == serial.outputs ? "yes" : "NO");
}

}  // namespace

void add_bench_compare_command(CLI::App& app) {
  auto options = std::make_shared<BenchCompareOptions>();
  options->job.order = "sorted";
  options->jobs = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  CLI::App* command = app.add_subcommand("bench-compare", command_description("bench-compare"));
  add_machine_options(*command, options->job.machine);
  add_policy_options(*command, options->job.policies);
  command->add_option("--trace", options->job.trace, "bundled trace or a file, as compare reads it")
      ->capture_default_str();
  command->add_option("--order", options->job.order, "dataset, sorted or shuffled")->capture_default_str();
  command->add_option("--limit", options->job.limit, "only the first N sequences (0: all)")
      ->capture_default_str();
  command
      ->add_option("--jobs", options->jobs,
                   "simulations run at once in the timed run (default: one per core), against one")
      ->check(positive_whole_number())
      ->capture_default_str();
  command->callback([options] { run(*options); });
}

}  // namespace paradyse::cli
