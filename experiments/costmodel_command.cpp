#include "experiments/costmodel_command.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "evaluation/compare_job.hpp"
#include "evaluation/profiling.hpp"
#include "experiments/command_table.hpp"
#include "experiments/inputs.hpp"
#include "steps/accuracy.hpp"
#include "steps/accuracy_json.hpp"
#include "steps/estimate.hpp"
#include "steps/learned_model.hpp"
#include "steps/profile.hpp"
#include "steps/step_simulator.hpp"

namespace paradyse::cli {
namespace {

struct ProfileOptions {
  evaluation::MachineOptions machine;
  std::string strategies = "all";
  std::string lengths;
  int degree = 0;
  int64_t batch = 1;
  std::string engine = "sim";
  std::string out;
};

void profile(const ProfileOptions& options) {
  const std::vector<int64_t> lengths = evaluation::parse_lengths(options.lengths, "--seq");
  const std::vector<const Strategy*> strategies =
      evaluation::parse_strategies(options.strategies, "--strategy");
  evaluation::check_engine(options.engine);
  check_output_path(options.out, OutputKind::file, "--out");
  const ModelSpec model = options.machine.load_model();
  const hw::ClusterSpec cluster = options.machine.load_cluster();
  steps::Estimator estimator(model, cluster);
  const int degree = options.degree == 0 ? cluster.num_gpus() : options.degree;
  std::unique_ptr<steps::StepSimulator> simulator;
  if (options.engine == "sim") simulator = std::make_unique<steps::StepSimulator>(model, cluster);
  const steps::Profile profile = evaluation::profile_uniform_plans(estimator, simulator.get(), degree,
                                                                   options.batch, strategies, lengths);
  if (profile.points.empty())
    throw InputError("--strategy", 0, "", "no strategy given can run " + model.name);
  steps::write_profile(profile, options.out);
  fmt::print("wrote {} points ({} of {} on {}, degree {}) to {}\n", profile.points.size(), options.engine,
             model.name, cluster.name, degree, options.out);
}

struct FitOptions {
  std::string profile;
  std::string out;
};

void fit(const FitOptions& options) {
  check_output_path(options.out, OutputKind::file, "--out");
  const steps::Profile profile = steps::read_profile(options.profile);
  const steps::LearnedModel model = [&] {
    try {
      return steps::LearnedModel::fit(profile);
    } catch (const InputError& e) {  // the fit knows the profile's contents, not its file
      if (!e.file().empty()) throw;
      throw InputError(options.profile, 0, e.field(), e.message());
    }
  }();
  model.save(options.out);
  fmt::print("fitted {} on {} (degree {}, batch {}) from {} points of {}; wrote {}\n", profile.model,
             profile.cluster, profile.degree, profile.batch, profile.points.size(), options.profile,
             options.out);
  fmt::print("{:<14} {:>10} {:>10}  polynomial degree beyond the range (time, memory, kept)\n", "strategy",
             "min_seq", "max_seq");
  std::vector<std::pair<std::string, std::string>> seen;
  for (const steps::ProfilePoint& point : profile.points) {
    const auto key = std::make_pair(point.strategy, point.recompute);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    const auto [low, high] = model.profiled_range(point.strategy, point.recompute);
    fmt::print("{:<14} {:>10} {:>10}  {}, {}, {}\n", point.strategy, low, high,
               model.polynomial_degree(point.strategy, point.recompute, "iteration_time_s"),
               model.polynomial_degree(point.strategy, point.recompute, "peak_memory_bytes"),
               model.polynomial_degree(point.strategy, point.recompute, "saved_bytes_per_layer"));
  }
}

struct EvalOptions {
  evaluation::MachineOptions machine;
  std::string model_file;
  std::string profile;
  bool json = false;
};

// Mean and max absolute percentage error of the learned and the analytic model against a held-out
// profile, inside and outside the lengths the learned model was fitted on.
void eval(const EvalOptions& options) {
  const steps::LearnedModel learned = steps::LearnedModel::load(options.model_file);
  const steps::Profile heldout = steps::read_profile(options.profile);
  const steps::AccuracyReport report =
      steps::evaluate_accuracy(learned, options.model_file, heldout, options.profile,
                               options.machine.load_model(), options.machine.load_cluster());
  const std::pair<const char*, const steps::ModelAccuracy*> models[] = {{"learned", &report.learned},
                                                                        {"analytic", &report.analytic}};
  if (options.json) {
    nlohmann::json out = report;
    out["model_file"] = options.model_file;
    out["profile"] = options.profile;
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("{} held-out points of {} ({}) against {}\n", report.points, options.profile, heldout.source,
             options.model_file);
  fmt::print("{:<10} {:<8} {:>7} {:>15} {:>14} {:>17} {:>16}\n", "model", "range", "points",
             "time_mean_ape_%", "time_max_ape_%", "memory_mean_ape_%", "memory_max_ape_%");
  for (const auto& [name, accuracy] : models) {
    for (const auto& [where, errors] :
         {std::pair{"inside", &accuracy->inside}, {"outside", &accuracy->outside}}) {
      if (errors->time.count() == 0) {
        fmt::print("{:<10} {:<8} {:>7}\n", name, where, 0);
        continue;
      }
      fmt::print("{:<10} {:<8} {:>7} {:>15.2f} {:>14.2f} {:>17.2f} {:>16.2f}\n", name, where,
                 errors->time.count(), errors->time.mean_pct(), errors->time.max_pct(),
                 errors->memory.mean_pct(), errors->memory.max_pct());
    }
  }
}

}  // namespace

void add_costmodel_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand("costmodel", command_description("costmodel"));
  command->require_subcommand(1);

  auto profile_options = std::make_shared<ProfileOptions>();
  CLI::App* profile_command = command->add_subcommand(
      "profile",
      "Simulate (or estimate) every strategy's uniform plan at each length and write a profile CSV.");
  add_machine_options(*profile_command, profile_options->machine);
  profile_command->add_option("--strategy", profile_options->strategies, "strategy name(s) or 'all'")
      ->capture_default_str();
  profile_command->add_option("--seq", profile_options->lengths, "sequence lengths: 1K,2K,4K")->required();
  add_degree_and_batch_options(*profile_command, profile_options->degree, profile_options->batch);
  profile_command->add_option("--engine", profile_options->engine, "sim or analytic")->capture_default_str();
  profile_command->add_option("--out", profile_options->out, "the profile CSV to write")->required();
  profile_command->callback([profile_options] { profile(*profile_options); });

  auto fit_options = std::make_shared<FitOptions>();
  CLI::App* fit_command = command->add_subcommand(
      "fit", "Fit the learned cost model (random forest + AIC polynomial per strategy) to a profile.");
  fit_command->add_option("--profile", fit_options->profile, "profile CSV")->required();
  fit_command->add_option("--out", fit_options->out, "the model file to write (JSON)")->required();
  fit_command->callback([fit_options] { fit(*fit_options); });

  auto eval_options = std::make_shared<EvalOptions>();
  CLI::App* eval_command =
      command->add_subcommand("eval",
                              "Mean and max absolute percentage error of the learned and the analytic model "
                              "against a held-out profile, "
                              "inside and outside the learned model's profiled lengths.");
  add_machine_options(*eval_command, eval_options->machine);
  eval_command->add_option("--costmodel", eval_options->model_file, "learned model file")->required();
  eval_command->add_option("--profile", eval_options->profile, "held-out profile CSV")->required();
  eval_command->add_flag("--json", eval_options->json, "print JSON instead of a table");
  eval_command->callback([eval_options] { eval(*eval_options); });
}

}  // namespace paradyse::cli
