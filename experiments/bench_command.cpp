#include "experiments/bench_command.hpp"

#include "common/statistics.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>

#include "experiments/inputs.hpp"
#include "steps/estimate.hpp"

namespace paradyse::cli {
namespace {

struct BenchCostModelOptions {
  evaluation::MachineOptions machine;
  std::string strategies = "all";
  std::string lengths = "4K,32K,256K";
  int repeat = 51;
};

void run(const BenchCostModelOptions& options) {
  const std::vector<int64_t> lengths = evaluation::parse_lengths(options.lengths, "--seq");
  const std::vector<const Strategy*> strategies =
      evaluation::parse_strategies(options.strategies, "--strategy");
  if (options.repeat < 1) throw InputError("--repeat", 0, "", "expected a positive count");
  steps::Estimator estimator(options.machine.load_model(), options.machine.load_cluster());
  using Clock = std::chrono::steady_clock;
  const auto micros = [](Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };

  fmt::print("time to trace and estimate one (strategy, length) of {} on {}: median of {} runs\n",
             estimator.model().name, estimator.cluster().name, options.repeat);
  fmt::print("{:<12} {:>8} {:>10} {:>10}\n", "strategy", "seq", "cold_us", "cached_us");
  std::vector<double> all_cold, all_cached;
  for (const Strategy* strategy : strategies) {
    if (estimator.unsupported(*strategy, estimator.cluster().num_gpus())) continue;
    for (int64_t tokens : lengths) {
      const steps::EstimateRequest request{.tokens = tokens};
      std::vector<double> cold, cached;
      for (int i = 0; i < options.repeat; ++i) {
        estimator.clear_cache();
        auto start = Clock::now();
        (void)estimator.estimate(*strategy, request);
        cold.push_back(micros(Clock::now() - start));
        start = Clock::now();
        (void)estimator.estimate(*strategy, request);
        cached.push_back(micros(Clock::now() - start));
      }
      fmt::print("{:<12} {:>8} {:>10.1f} {:>10.2f}\n", strategy->name(), tokens, median(cold),
                 median(cached));
      all_cold.push_back(median(cold));
      all_cached.push_back(median(cached));
    }
  }
  fmt::print("median over rows: cold {:.1f} us, cached {:.2f} us\n", median(all_cold), median(all_cached));
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchCostModelOptions>();
  CLI::App* command = app.add_subcommand(
      "bench",
      "Benchmark: time to trace and estimate one (strategy, length), cold and cached; prints medians.");
  add_machine_options(*command, options->machine);
  command->add_option("--strategy", options->strategies, "strategy name(s) or 'all'")->capture_default_str();
  command->add_option("--seq", options->lengths, "sequence length(s), comma-separated")
      ->capture_default_str();
  command->add_option("--repeat", options->repeat, "runs per row")->capture_default_str();
  command->callback([options] { run(*options); });
}

}  // namespace paradyse::cli
