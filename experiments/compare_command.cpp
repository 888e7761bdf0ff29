#include "experiments/compare_command.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <iostream>

#include "experiments/compare.hpp"
#include "experiments/compare_report.hpp"
#include "experiments/progress_bar.hpp"
#include "traces/prepare.hpp"
#include "traces/trace.hpp"

namespace paradyse::cli {
namespace {

struct CompareCommandOptions {
  MachineOptions machine;
  PolicyOptions policies;
  std::string trace = "github-code-like";
  std::string column = "length";
  std::string field = "length";
  std::string order = "dataset";
  uint64_t seed = 0;
  int64_t max_len = 0;
  std::string over = "drop";
  int64_t limit = 0;
  double sample = 1;
  std::string engine = "sim";
  double grid_ratio = 1.05;
  std::string out = "out/compare";
  bool json = false;
};

void run(const CompareCommandOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Every input is checked before anything is computed or written.
  if (options.engine != "sim" && options.engine != "analytic")
    throw InputError("--engine", 0, "", "expected sim or analytic, got '" + options.engine + "'");
  if (options.grid_ratio != 0 && !(options.grid_ratio > 1 && options.grid_ratio <= 2))
    throw InputError("--grid-ratio", 0, "",
                     "expected 0 (simulate every length) or a ratio in (1, 2], got " +
                         fmt::format("{}", options.grid_ratio));
  if (options.policies.batch != 1)
    throw InputError("--batch", 0, "", "compare trains one sequence per step, as the paper does: expected 1");
  traces::PrepareOptions prepare;
  prepare.order = traces::parse_order(options.order);
  prepare.seed = options.seed;
  if (options.max_len < 0)
    throw InputError("--max-len", 0, "", "expected a positive token count or 0 (no cap)");
  prepare.max_len = options.max_len;
  prepare.over = traces::parse_over_rule(options.over);
  if (options.limit < 0) throw InputError("--limit", 0, "", "expected a positive count or 0 (all)");
  prepare.limit = options.limit;
  if (!(options.sample > 0 && options.sample <= 1))
    throw InputError("--sample", 0, "", fmt::format("expected a fraction in (0, 1], got {}", options.sample));
  prepare.sample = options.sample;
  const traces::Trace trace = traces::load_trace(options.trace, {options.column, options.field});
  const traces::PreparedTrace prepared = traces::prepare(trace, prepare);
  PolicySet set = options.policies.build(options.machine);

  ProgressBar bar(isatty(STDERR_FILENO) != 0);
  StepEngine engine(set.model, set.cluster, set.degree, options.engine, options.grid_ratio);
  std::vector<selector::Policy*> policies;
  for (auto& policy : set.policies) policies.push_back(policy.get());
  const CompareResult result = run_compare(
      policies, prepared.lengths, engine,
      [&](int64_t done, int64_t total, const std::string& what) { bar.update(done, total, what); });
  bar.finish();

  RunDescription description;
  description.model = set.model.name;
  description.cluster = set.cluster.name;
  description.degree = set.degree;
  description.trace = trace.name;
  description.trace_about = trace.description;
  description.preparation = prepared.description;
  description.sorted = prepare.order == traces::Order::sorted;
  description.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  write_compare_outputs(result, description, options.out);
  description.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();

  if (options.json) {
    std::cout << summary_json(result, description).dump(2) << "\n";
    return;
  }
  fmt::print("{} on {} (degree {}), trace {}: {}\n", description.model, description.cluster,
             description.degree, description.trace, description.preparation);
  fmt::print("times: {}\n", result.method);
  if (result.interpolation && result.interpolation->samples > 0)
    fmt::print("interpolation error on {} sequences simulated directly: mean {:.3f} %, max {:.3f} %\n",
               result.interpolation->samples, result.interpolation->mean_pct, result.interpolation->max_pct);
  fmt::print("{}", summary_table(result));
  fmt::print(
      "wrote {}/{{summary.json, per_sequence.csv, report.md, cumulative_time.png, time_by_length.png}} in "
      "{:.1f} s\n",
      options.out, description.wall_seconds);
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto options = std::make_shared<CompareCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "compare",
      "Train a dataset's real length trace under each policy, one sequence per training step: total time, "
      "tokens/s, MFU, sequences out of memory, the longest sequence trained before the first out of memory, "
      "plan "
      "switches; writes summary.json, per_sequence.csv, report.md and the plots (the paper's Figure 2) to "
      "--out.");
  options->machine.add_to(*command);
  options->policies.add_to(*command);
  command
      ->add_option(
          "--trace", options->trace,
          "bundled trace (github-code-like, repo-level-code, grch38, grch38-char) or a file: one length "
          "per line, .csv (--column), .jsonl (--field) or .pb")
      ->capture_default_str();
  command->add_option("--column", options->column, "CSV column holding the length")->capture_default_str();
  command->add_option("--field", options->field, "JSONL field holding the length")->capture_default_str();
  command->add_option("--order", options->order, "dataset, sorted (short to long, the paper's) or shuffled")
      ->capture_default_str();
  command->add_option("--seed", options->seed, "seed of --order shuffled and --sample")
      ->capture_default_str();
  command->add_option("--max-len", options->max_len, "cap on sequence length (0: none)")
      ->capture_default_str();
  command->add_option("--over", options->over, "what happens above --max-len: drop, truncate or split")
      ->capture_default_str();
  command->add_option("--limit", options->limit, "train only the first N sequences (0: all)")
      ->capture_default_str();
  command->add_option("--sample", options->sample, "keep each sequence with this probability")
      ->capture_default_str();
  command->add_option("--engine", options->engine, "sim (the simulator times every step) or analytic")
      ->capture_default_str();
  command
      ->add_option("--grid-ratio", options->grid_ratio,
                   "sim: simulate each plan at lengths this far apart and interpolate between them (0: every "
                   "length); the error is measured and reported")
      ->capture_default_str();
  command->add_option("--out", options->out, "folder for the report, tables and plots")
      ->capture_default_str();
  command->add_flag("--json", options->json, "print summary.json instead of the table");
  command->callback([options] { run(*options); });
}

}  // namespace paradyse::cli
