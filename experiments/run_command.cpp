#include "experiments/run_command.hpp"

#include <fmt/core.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/csv.hpp"
#include "common/errors.hpp"
#include "common/units.hpp"
#include "evaluation/run_memory.hpp"
#include "experiments/command_table.hpp"
#include "experiments/real_options.hpp"
#include "real_backend/run_report_json.hpp"
#include "steps/profile.hpp"

namespace paradyse::cli {
namespace {

struct RunOptions {
  RealRunOptions real;
  std::string profile;
  std::string ops;
  bool json = false;
};

void print_table(const real::RunReport& report, const ModelSpec& model, const Plan& plan) {
  fmt::print("{} on {} ranks ({}), plan {}\n", model.name, report.ranks, report.communicator,
             plan_name(plan));
  fmt::print("{:>8}  {:>12}  {:>10}  {:>12}  {:>13}  {:>10}\n", "seq", "median step", "tokens/s",
             "peak memory", "saved / layer", "loss/token");
  for (const real::LengthMeasurement& m : report.lengths)
    fmt::print("{:>8}  {:>10.4f} s  {:>10.0f}  {:>8.1f} MiB  {:>9.2f} MiB  {:>10.4f}\n", m.seq,
               m.median_step_s, static_cast<double>(m.seq) / m.median_step_s,
               static_cast<double>(m.peak_bytes) / kMiB, static_cast<double>(m.saved_bytes_per_layer) / kMiB,
               m.loss_per_token);
}

// The profile dataset of the learned cost model (steps/profile.hpp), measured for real.
void write_profile(const std::string& path, const real::RunReport& report, const ModelSpec& model,
                   const real::RunRequest& request, const std::string& device) {
  steps::Profile profile;
  profile.model = model.name;
  profile.cluster = "local-" + device;
  profile.degree = report.ranks;
  profile.batch = request.batch;
  profile.source = "real";
  for (const real::LengthMeasurement& m : report.lengths)
    profile.points.push_back({std::string(request.plan[0].strategy->name()),
                              std::string(to_string(request.plan[0].recompute)), m.seq, m.median_step_s,
                              static_cast<double>(m.peak_bytes),
                              static_cast<double>(m.saved_bytes_per_layer)});
  steps::write_profile(profile, path);
}

void write_ops(const std::string& path, const real::RunReport& report) {
  write_file_atomically(path, [&](std::ostream& out) {
    out << csv::row({"seq", "phase", "layer", "label", "op", "seconds"});
    for (const real::TimedOp& op : report.ops)
      out << csv::row({std::to_string(op.seq), to_string(op.phase), std::to_string(op.layer), op.label, op.op,
                       fmt::format("{}", op.seconds)});
  });
}

void run(const RunOptions& options) {
  if (!options.profile.empty()) check_output_path(options.profile, OutputKind::file, "--profile");
  if (!options.ops.empty()) check_output_path(options.ops, OutputKind::file, "--ops");
  const ModelSpec model = options.real.load_model();
  const real::RunRequest request = options.real.request(model);
  if (!options.profile.empty() &&
      request.plan != uniform_plan(*request.plan[0].strategy, static_cast<int64_t>(request.plan.size()),
                                   request.plan[0].recompute))
    throw InputError("--profile", 0, "",
                     "expected a uniform plan (one strategy for every layer): profiles "
                     "measure strategies one at a time, got " +
                         plan_name(request.plan));
  // Ranks started here share this machine's memory (a launcher's ranks may be spread over several;
  // GPU memory is the device's).
  if (!request.cuda && !real::rank_from_environment())
    evaluation::check_run_fits(
        evaluation::predicted_rank_bytes(model, request.plan, options.real.ranks, request.lengths,
                                         request.batch, request.mixed_precision),
        options.real.ranks, evaluation::available_memory_bytes());
  on_every_rank(options.real.ranks, options.real.timeout_s, [&](const real::RankEnvironment& env) {
    real::RunRequest r = request;
    r.profile_ops = !options.ops.empty();
    const auto reports = real::run_training(env, {r});
    if (reports.empty()) return;
    const real::RunReport* report = &reports[0];
    if (!options.profile.empty()) write_profile(options.profile, *report, model, r, options.real.device);
    if (!options.ops.empty()) write_ops(options.ops, *report);
    if (options.json) {
      nlohmann::json j = *report;
      j["model"] = model.name;
      j["plan"] = plan_name(r.plan);
      std::cout << j.dump(2) << "\n";
    } else {
      print_table(*report, model, r.plan);
    }
  });
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand("run", command_description("run"));
  options->real.add_to(*command);
  command->add_option("--profile", options->profile,
                      "also write the measurements as a profile dataset (CSV) for `paradyse costmodel fit`");
  command->add_option("--ops", options->ops, "also write every op's time of the last step (rank 0) as CSV");
  command->add_flag("--json", options->json, "print JSON instead of a table");
  command->callback([options] { run(*options); });
}

}  // namespace paradyse::cli
