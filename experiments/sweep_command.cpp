// paradyse sweep: the compare at every point of a spec's grid (evaluation/sweep.hpp).
#include "experiments/sweep_command.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <iostream>

#include "common/errors.hpp"

#include "evaluation/sweep.hpp"
#include "experiments/command_table.hpp"

namespace paradyse::cli {
namespace {

using OrderedJson = nlohmann::ordered_json;

struct SweepOptions {
  std::string spec;
  std::string out = "out/sweep";
  int jobs = 1;
  bool plan_only = false;
  bool json = false;
};

void run(const SweepOptions& options) {
  if (options.jobs < 1) throw InputError("--jobs", 0, "", "expected a positive count");
  // Every point is checked before anything runs.
  const evaluation::SweepSpec spec = evaluation::load_sweep_spec(options.spec, options.plan_only);
  const evaluation::SweepRun run = evaluation::run_sweep(spec, options.out, options.jobs);
  if (run.rows.empty()) return;  // an MPI rank other than 0
  if (options.json) {
    std::cout << OrderedJson{{"rows", run.rows}}.dump(2) << "\n";
    return;
  }
  fmt::print("{} points ({} run now, {} from an earlier run){}\n", spec.points.size(), run.run_now,
             spec.points.size() - static_cast<std::size_t>(run.run_now),
             run.mpi_ranks > 0 ? fmt::format(", over {} MPI ranks", run.mpi_ranks) : "");
  // Speedups over the best static on the sequences both train; "-" where the run has no such policy.
  const auto speedup = [](const OrderedJson& row, const char* key) {
    return row.contains(key) ? fmt::format("{:.2f}x", row.at(key).get<double>()) : std::string("-");
  };
  const auto any_row_has = [&](const char* key) {
    return std::any_of(run.rows.begin(), run.rows.end(),
                       [&](const OrderedJson& row) { return row.contains(key); });
  };
  const bool groups = any_row_has("best_group"), tuned = any_row_has("fastest_tuned_static");
  // With tuned statics: the fastest tuned static, and paradyse's and the best group policy's speedups
  // over it on the steps both train whole.
  const auto tuned_cells = [&](const OrderedJson& row) {
    if (!row.contains("fastest_tuned_static")) return fmt::format(" {:>24} {:>9} {:>9}", "-", "-", "-");
    const std::string name = row.at("fastest_tuned_static").get<std::string>();
    return fmt::format(" {:>24} {:>9} {:>9}", name.substr(name.find(':') + 1),
                       speedup(row, "speedup_tuned_paradyse"), speedup(row, "speedup_tuned_groups"));
  };
  fmt::print("{:<44} {:>18} {:>18} {:>17}{}{}\n", "point", "best static", "paradyse speedup",
             "optimal speedup", groups ? fmt::format(" {:>24}", "best group policy speedup") : "",
             tuned ? fmt::format(" {:>24} {:>9} {:>9}", "fastest tuned static", "paradyse", "groups") : "");
  for (const OrderedJson& row : run.rows) {
    const std::string best = row.at("best_static").get<std::string>();
    fmt::print(
        "{:<44} {:>18} {:>18} {:>17}{}{}\n", row.at("id").get<std::string>(),
        best.empty() ? "-" : best.substr(best.find(':') + 1), speedup(row, "speedup_paradyse"),
        speedup(row, "speedup_optimal"),
        groups ? fmt::format(" {:>24}", row.contains("best_group") ? row.at("best_group").get<std::string>() +
                                                                         " " + speedup(row, "speedup_groups")
                                                                   : "-")
               : "",
        tuned ? tuned_cells(row) : "");
  }
  fmt::print("wrote {0}/sweep.csv, {0}/sweep.json, {0}/speedup.png, {0}/longest.png\n", options.out);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* command = app.add_subcommand("sweep", command_description("sweep"));
  command->add_option("--spec", options->spec, "the sweep spec, .json or .toml (its format: docs/sweep.md)")
      ->required();
  command->add_option("--out", options->out, "folder for rows.jsonl, sweep.csv, sweep.json and the plots")
      ->capture_default_str();
  command
      ->add_option("--jobs", options->jobs,
                   "points run at once, each in its own process (ignored under mpirun)")
      ->capture_default_str();
  command->add_flag(
      "--plan-only", options->plan_only,
      "only plan, on the analytic model, at base.plan_lengths (default 1K, 2K, ..., 1M) instead of "
      "running the trace (the same as base.mode = plan)");
  command->add_flag("--json", options->json, "print the rows as JSON");
  command->callback([options] { run(*options); });
}

}  // namespace paradyse::cli
