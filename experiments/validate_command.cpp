#include "experiments/validate_command.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/errors.hpp"
#include "common/statistics.hpp"
#include "common/units.hpp"
#include "evaluation/options.hpp"
#include "evaluation/validation.hpp"
#include "experiments/command_table.hpp"
#include "experiments/inputs.hpp"
#include "experiments/real_options.hpp"

namespace paradyse::cli {
namespace {

struct ValidateOptions {
  RealRunOptions real;
  std::string cluster;  // default: local-cpu.json, or local-cuda.json with --device cuda
  int rounds = 3;
  bool any_speed = false;
  bool json = false;
  bool ops = false;
};

void print_rows(const std::vector<evaluation::ValidationRow>& rows, const ValidateOptions& options,
                const std::string& model, const hw::ClusterSpec& cluster) {
  const bool drift = std::any_of(rows.begin(), rows.end(),
                                 [](const evaluation::ValidationRow& r) { return r.reference_ratio > 0; });
  fmt::print("{} on {} ranks of this machine, simulated on {}\n", model, options.real.ranks, options.cluster);
  fmt::print("{:<12} {:>7}  {:>11} {:>11} {:>8}  {:>12} {:>12} {:>8}{}\n", "plan", "seq", "measured",
             "simulated", "error", "measured", "simulated", "error", drift ? "   machine   rounds" : "");
  PercentageErrors time_errors, memory_errors, at_speed_errors;
  for (const evaluation::ValidationRow& r : rows) {
    std::string speed;
    if (r.reference_ratio > 0)
      speed = fmt::format("  {:>+7.1f}%  {:>3} of {}", 100 * (r.reference_ratio - 1), r.rounds_kept,
                          r.rounds_run);
    fmt::print("{:<12} {:>7}  {:>9.4f} s {:>9.4f} s {:>+7.1f}%  {:>8.2f} MiB {:>8.2f} MiB {:>+7.1f}%{}\n",
               r.plan, r.documents > 1 ? fmt::format("{}/{}d", r.seq, r.documents) : std::to_string(r.seq),
               r.measured_s, r.simulated_s, 100 * r.time_error, r.measured_peak_bytes / kMiB,
               r.simulated_peak_bytes / kMiB, 100 * r.memory_error, speed);
    time_errors.add(r.simulated_s, r.measured_s);
    memory_errors.add(r.simulated_peak_bytes, r.measured_peak_bytes);
    if (r.rounds_kept > 0) at_speed_errors.add(r.simulated_s, r.measured_s);
  }
  fmt::print("mean |error|: time {:.1f}%, memory {:.1f}%\n", time_errors.mean_pct(),
             memory_errors.mean_pct());
  if (!drift) return;
  const auto at_speed = static_cast<std::size_t>(std::count_if(
      rows.begin(), rows.end(), [](const evaluation::ValidationRow& r) { return r.rounds_kept > 0; }));
  fmt::print(
      "machine: the speed reference's time around the row's kept rounds against the calibration's "
      "({:.4f} s): + is slower\n"
      "rounds: those whose steps were kept, of those run: {}; a row with none kept is timed over "
      "all of them\n",
      cluster.calibration->seconds(),
      options.any_speed ? "every round (--any-speed)"
                        : "the machine within 10 % of the calibration's speed before and after them");
  if (at_speed < rows.size())
    fmt::print("rows at the calibration's speed: {} of {}, mean |time error| {:.1f}%\n", at_speed,
               rows.size(), at_speed > 0 ? at_speed_errors.mean_pct() : 0.0);
}

void print_kernel_times(const std::vector<evaluation::KernelTimeRow>& rows) {
  fmt::print("\nrank 0's last step by backend call: measured against the model's price of each op\n");
  fmt::print("{:<12} {:>7}  {:<24} {:>6} {:>11} {:>11} {:>8}\n", "plan", "seq", "call", "calls", "measured",
             "modelled", "error");
  for (const evaluation::KernelTimeRow& r : rows) {
    const std::string error =
        r.measured_s > 0 ? fmt::format("{:+.1f}%", 100 * (r.modelled_s - r.measured_s) / r.measured_s) : "";
    fmt::print("{:<12} {:>7}  {:<24} {:>6} {:>9.2f}ms {:>9.2f}ms {:>8}\n", r.plan, r.seq, r.kernel, r.calls,
               1e3 * r.measured_s, 1e3 * r.modelled_s, error);
  }
}

void validate(ValidateOptions options) {
  if (options.cluster.empty())
    options.cluster = options.real.device == "cuda" ? "local-cuda.json" : "local-cpu.json";
  const ModelSpec model = options.real.load_model();
  if (!std::filesystem::exists(options.cluster))
    throw InputError(options.cluster, 0, "",
                     "no such cluster file: measure this machine first with `paradyse calibrate --ranks " +
                         std::to_string(options.real.ranks) + " --device " + options.real.device + " --out " +
                         options.cluster + "`");
  const hw::ClusterSpec cluster = hw::load_cluster(options.cluster);
  if (cluster.num_gpus() < options.real.ranks)
    throw InputError(options.cluster, 0, "gpus_per_node",
                     "expected at least --ranks = " + std::to_string(options.real.ranks) + " ranks, got " +
                         std::to_string(cluster.num_gpus()) +
                         " (calibrate with as many ranks as you validate on)");
  std::vector<real::RunRequest> requests;
  if (options.real.plan != "all") requests.push_back(options.real.request(model));
  RealRunOptions one = options.real;
  // "all": each strategy that can run here.
  for (const Strategy* strategy : options.real.plan == "all" ? strategies_for(model, options.real.ranks)
                                                             : std::vector<const Strategy*>{}) {
    one.plan = std::string(strategy->name());
    requests.push_back(one.request(model));
  }
  for (real::RunRequest& request : requests) {
    request.profile_ops = options.ops;
    request.time_reference = cluster.calibration.has_value();
  }
  if (requests.empty())
    throw InputError(
        "--plan", 0, "",
        "no strategy can run " + model.name + " on " + std::to_string(options.real.ranks) + " ranks");

  on_every_rank(options.real.ranks, options.real.timeout_s, [&](const real::RankEnvironment& env) {
    real::SpeedMatch match;
    if (cluster.calibration && !options.any_speed) match.reference_s = cluster.calibration->seconds();
    const std::vector<real::RunReport> reports =
        real::run_training_in_rounds(env, requests, options.rounds, match);
    if (reports.empty()) return;
    const std::vector<evaluation::ValidationRow> rows =
        evaluation::simulate_measurements(requests, reports, model, cluster, options.real.ranks);
    std::vector<evaluation::KernelTimeRow> kernels;
    if (options.ops)
      kernels = evaluation::kernel_times(requests, reports, model, cluster, options.real.ranks);
    if (options.json) {
      nlohmann::json out = rows;
      if (options.ops) out = {{"steps", rows}, {"calls", kernels}};
      std::cout << out.dump(2) << "\n";
      return;
    }
    print_rows(rows, options, model.name, cluster);
    if (options.ops) print_kernel_times(kernels);
  });
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto options = std::make_shared<ValidateOptions>();
  CLI::App* command = app.add_subcommand("validate", command_description("validate"));
  options->real.steps = 1;  // per round: a row's steps are spread over its rounds
  options->real.add_to(*command);
  command
      ->add_option("--rounds", options->rounds,
                   "times every row is run, all rows once per round: a row's measured time is the median "
                   "of its --steps over all rounds, so that one spell of a shared machine's speed sways "
                   "one sample of it, not all")
      ->check(positive_whole_number())
      ->capture_default_str();
  command->add_flag(
      "--any-speed", options->any_speed,
      "keep every round's steps; by default a row keeps the rounds run with the machine within "
      "10 % of the calibration's speed (its speed reference before and after them), and a row "
      "short of --rounds such rounds runs again, up to 2 x --rounds rounds, so that the model is "
      "compared with the machine it was measured on, not with another tenant's slow spell");
  command->add_option(
      "--cluster", options->cluster,
      "the calibrated cluster file of this machine (default: local-cpu.json, or local-cuda.json "
      "with --device cuda)");
  command->add_flag("--json", options->json, "print JSON instead of a table");
  command->add_flag("--ops", options->ops,
                    "also time every op of rank 0's last step and show, by backend call, the measured "
                    "time against the model's (JSON: {\"steps\": [...], \"calls\": [...]})");
  command->callback([options] { validate(*options); });
}

}  // namespace paradyse::cli
