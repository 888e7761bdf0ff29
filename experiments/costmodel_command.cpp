#include "experiments/costmodel_command.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "costmodel/estimate.hpp"
#include "costmodel/learned_model.hpp"
#include "costmodel/profile.hpp"
#include "experiments/compare_job.hpp"
#include "experiments/inputs.hpp"
#include "experiments/profiling.hpp"
#include "sim/simulator.hpp"

namespace paradyse::cli {
namespace {

struct ProfileOptions {
  MachineOptions machine;
  std::string strategies = "all";
  std::string lengths;
  int degree = 0;
  int64_t batch = 1;
  std::string engine = "sim";
  std::string out;
};

void profile(const ProfileOptions& options) {
  const std::vector<int64_t> lengths = parse_lengths(options.lengths, "--seq");
  const std::vector<const Strategy*> strategies = parse_strategies(options.strategies, "--strategy");
  check_engine(options.engine);
  if (options.out.empty()) throw InputError("--out", 0, "", "expected a file to write the profile to");
  const ModelSpec model = options.machine.load_model();
  const hw::ClusterSpec cluster = options.machine.load_cluster();
  costmodel::Estimator estimator(model, cluster);
  const int degree = options.degree == 0 ? cluster.num_gpus() : options.degree;
  std::unique_ptr<sim::Simulator> simulator;
  if (options.engine == "sim") simulator = std::make_unique<sim::Simulator>(model, cluster);
  const costmodel::Profile profile =
      profile_uniform_plans(estimator, simulator.get(), degree, options.batch, strategies, lengths);
  if (profile.points.empty())
    throw InputError("--strategy", 0, "", "no strategy given can run " + model.name);
  costmodel::write_profile(profile, options.out);
  fmt::print("wrote {} points ({} of {} on {}, degree {}) to {}\n", profile.points.size(), options.engine,
             model.name, cluster.name, degree, options.out);
}

struct FitOptions {
  std::string profile;
  std::string out;
};

void fit(const FitOptions& options) {
  const costmodel::Profile profile = costmodel::read_profile(options.profile);
  const costmodel::LearnedModel model = costmodel::LearnedModel::fit(profile);
  model.save(options.out);
  fmt::print("fitted {} on {} (degree {}, batch {}) from {} points of {}; wrote {}\n", profile.model,
             profile.cluster, profile.degree, profile.batch, profile.points.size(), options.profile,
             options.out);
  fmt::print("{:<14} {:>10} {:>10}  polynomial degree beyond the range (time, memory, kept)\n", "strategy",
             "min_seq", "max_seq");
  std::vector<std::pair<std::string, std::string>> seen;
  for (const costmodel::ProfilePoint& point : profile.points) {
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
  MachineOptions machine;
  std::string model_file;
  std::string profile;
  bool json = false;
};

struct Errors {
  std::vector<double> time, memory;  // absolute percentage errors
  void add(double predicted_time, double predicted_memory, const costmodel::ProfilePoint& measured) {
    time.push_back(100 * std::abs(predicted_time - measured.iteration_time_s) / measured.iteration_time_s);
    memory.push_back(100 * std::abs(predicted_memory - measured.peak_memory_bytes) /
                     measured.peak_memory_bytes);
  }
};

nlohmann::ordered_json summary(const std::vector<double>& errors) {
  if (errors.empty()) return nullptr;
  double sum = 0;
  for (double e : errors) sum += e;
  return {{"mean_ape_pct", sum / static_cast<double>(errors.size())},
          {"max_ape_pct", *std::max_element(errors.begin(), errors.end())}};
}

// Mean and max absolute percentage error of the learned and the analytic model against a held-out
// profile, inside and outside the lengths the learned model was fitted on.
void eval(const EvalOptions& options) {
  const costmodel::LearnedModel learned = costmodel::LearnedModel::load(options.model_file);
  const costmodel::Profile heldout = costmodel::read_profile(options.profile);
  const ModelSpec model = options.machine.load_model();
  const hw::ClusterSpec cluster = options.machine.load_cluster();
  const auto check = [&](const std::string& file, const std::string& field, const std::string& in_file,
                         const std::string& asked) {
    if (in_file != asked)
      throw InputError(file, 0, field,
                       "is '" + in_file + "', but '" + asked + "' was asked for (--model, --cluster)");
  };
  check(options.model_file, "model", learned.model_name(), model.name);
  check(options.model_file, "cluster", learned.cluster_name(), cluster.name);
  check(options.profile, "model", heldout.model, model.name);
  check(options.profile, "cluster", heldout.cluster, cluster.name);
  check(options.profile, "degree", std::to_string(heldout.degree), std::to_string(learned.degree()));
  check(options.profile, "batch", std::to_string(heldout.batch), std::to_string(learned.batch()));

  costmodel::Estimator estimator(model, cluster);
  std::map<std::string, Errors> errors;  // "learned inside", "analytic outside", ...
  int compared = 0;
  for (const costmodel::ProfilePoint& point : heldout.points) {
    const Strategy* strategy = find_strategy(point.strategy);
    if (strategy == nullptr || !learned.has(point.strategy, point.recompute)) continue;
    const costmodel::LearnedPrediction p = learned.predict(point.strategy, point.recompute, point.seq);
    const Recompute recompute = *parse_recompute(point.recompute);
    const costmodel::Estimate e = estimator.estimate(
        *strategy, {.tokens = point.seq, .degree = heldout.degree, .batch = heldout.batch}, recompute);
    const std::string where = p.extrapolated ? "outside" : "inside";
    errors["learned " + where].add(p.iteration_time_s, p.peak_memory_bytes, point);
    errors["analytic " + where].add(e.time.total_seconds, e.memory.peak, point);
    ++compared;
  }
  if (compared == 0)
    throw InputError(options.profile, 0, "",
                     "no point of a strategy the cost model knows; nothing to compare");

  nlohmann::ordered_json out;
  out["model_file"] = options.model_file;
  out["profile"] = options.profile;
  out["points"] = compared;
  for (const char* model_kind : {"learned", "analytic"}) {
    for (const char* where : {"inside", "outside"}) {
      const auto found = errors.find(std::string(model_kind) + " " + where);
      const Errors none;
      const Errors& e = found == errors.end() ? none : found->second;
      out[model_kind][where] = {
          {"points", e.time.size()}, {"time", summary(e.time)}, {"memory", summary(e.memory)}};
    }
  }
  if (options.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("{} held-out points of {} ({}) against {}\n", compared, options.profile, heldout.source,
             options.model_file);
  fmt::print("{:<10} {:<8} {:>7} {:>15} {:>14} {:>17} {:>16}\n", "model", "range", "points",
             "time_mean_ape_%", "time_max_ape_%", "memory_mean_ape_%", "memory_max_ape_%");
  for (const char* model_kind : {"learned", "analytic"}) {
    for (const char* where : {"inside", "outside"}) {
      const auto& row = out[model_kind][where];
      if (row["points"] == 0) {
        fmt::print("{:<10} {:<8} {:>7}\n", model_kind, where, 0);
        continue;
      }
      fmt::print("{:<10} {:<8} {:>7} {:>15.2f} {:>14.2f} {:>17.2f} {:>16.2f}\n", model_kind, where,
                 row["points"].get<int>(), row["time"]["mean_ape_pct"].get<double>(),
                 row["time"]["max_ape_pct"].get<double>(), row["memory"]["mean_ape_pct"].get<double>(),
                 row["memory"]["max_ape_pct"].get<double>());
    }
  }
}

}  // namespace

void add_costmodel_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "costmodel",
      "The paper's learned cost model: profile uniform plans (simulated), fit a random forest inside the "
      "profiled "
      "lengths and a polynomial beyond, and evaluate it and the analytic model on held-out profiles.");
  command->require_subcommand(1);

  auto profile_options = std::make_shared<ProfileOptions>();
  CLI::App* profile_command = command->add_subcommand(
      "profile",
      "Simulate (or estimate) every strategy's uniform plan at each length and write a profile CSV.");
  profile_options->machine.add_to(*profile_command);
  profile_command->add_option("--strategy", profile_options->strategies, "strategy name(s) or 'all'")
      ->capture_default_str();
  profile_command->add_option("--seq", profile_options->lengths, "sequence lengths: 1K,2K,4K")->required();
  profile_command->add_option("--degree", profile_options->degree, "parallel degree (default: every GPU)");
  profile_command->add_option("--batch", profile_options->batch, "sequences per micro-batch")
      ->capture_default_str();
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
  eval_options->machine.add_to(*eval_command);
  eval_command->add_option("--costmodel", eval_options->model_file, "learned model file")->required();
  eval_command->add_option("--profile", eval_options->profile, "held-out profile CSV")->required();
  eval_command->add_flag("--json", eval_options->json, "print JSON instead of a table");
  eval_command->callback([eval_options] { eval(*eval_options); });
}

}  // namespace paradyse::cli
