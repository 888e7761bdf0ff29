#include "experiments/published_command.hpp"

#include <fmt/core.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/statistics.hpp"
#include "evaluation/published_runs.hpp"

namespace paradyse::cli {
namespace {

struct PublishedOptions {
  std::string table;  // empty: the bundled tables
  bool json = false;
};

std::string plan_text(const evaluation::PublishedRun& run) {
  std::string plan(run.strategy->name());
  if (run.recompute != Recompute::none) plan += ":" + std::string(to_string(run.recompute));
  return plan;
}

// What else the run is: model, batch × seq (× micro-batches), cluster × degree, attention and loss
// kernels.
std::string configuration(const evaluation::PublishedRun& run) {
  std::string text = fmt::format("{} {}×{}", run.model, run.batch, run.seq);
  if (run.micro_batches > 1) text += fmt::format("×{}", run.micro_batches);
  text += run.data_parallel > 1
              ? fmt::format(", {} ×{} groups of {}", run.cluster, run.data_parallel, run.degree)
              : fmt::format(", {} ×{}", run.cluster, run.degree);
  if (run.data_parallel > 1 && run.gradient_reduce_dtype == DType::fp32)
    text += ", gradients reduced in fp32";
  if (run.attention_kernel) text += fmt::format(", {} attention", to_string(*run.attention_kernel));
  if (!run.attention_implementation.empty()) text += ", attention by " + run.attention_implementation;
  if (run.loss_kernel) text += fmt::format(", {} loss", to_string(*run.loss_kernel));
  return text;
}

// In the unit of the measurement `scale_s` it stands beside.
std::string time_text(double s, double scale_s) {
  return scale_s < 1 ? fmt::format("{:.2f} ms", s * 1e3) : fmt::format("{:.3f} s", s);
}

void print_json(const std::vector<evaluation::PublishedTable>& tables,
                const std::vector<evaluation::PublishedPrediction>& predictions,
                const PercentageErrors& errors, const std::vector<evaluation::SourceAgreement>& ranks) {
  nlohmann::json out;
  out["runs"] = nlohmann::json::array();
  for (const evaluation::PublishedPrediction& p : predictions)
    out["runs"].push_back({{"name", p.run.name},
                           {"source", p.run.source},
                           {"table", p.run.table},
                           {"plan", plan_text(p.run)},
                           {"model", p.run.model},
                           {"cluster", p.run.cluster},
                           {"degree", p.run.degree},
                           {"data_parallel", p.run.data_parallel},
                           {"batch", p.run.batch},
                           {"seq", p.run.seq},
                           {"micro_batches", p.run.micro_batches},
                           {"measure", to_string(p.run.measure)},
                           {"measured_s", p.run.measured_s},
                           {"predicted_s", p.predicted_s},
                           {"error", p.error},
                           {"fits", p.fits},
                           {"framework", p.framework},
                           {"attention_implementation", p.run.attention_implementation},
                           {"host_bound_share", p.host_bound_share}});
  out["mean_abs_error_pct"] = errors.mean_pct();
  out["max_abs_error_pct"] = errors.max_pct();
  out["agreement_by_source"] = nlohmann::json::array();
  for (const evaluation::SourceAgreement& r : ranks)
    out["agreement_by_source"].push_back(
        {{"source", r.source},
         {"measure", to_string(r.measure)},
         {"runs", r.runs},
         {"spearman", std::isnan(r.spearman) ? nlohmann::json() : nlohmann::json(r.spearman)},
         {"mean_abs_error_pct", 100 * r.mean_abs_error}});
  out["unexpressed"] = nlohmann::json::array();
  for (const evaluation::PublishedTable& table : tables)
    for (const evaluation::UnexpressedRows& rows : table.unexpressed)
      out["unexpressed"].push_back({{"source", table.source}, {"rows", rows.rows}, {"reason", rows.reason}});
  std::cout << out.dump(2) << "\n";
}

void print_table(const std::vector<evaluation::PublishedTable>& tables,
                 const std::vector<evaluation::PublishedPrediction>& predictions,
                 const PercentageErrors& errors, const std::vector<evaluation::SourceAgreement>& ranks) {
  std::string source;
  for (const evaluation::PublishedPrediction& p : predictions) {
    if (p.run.source != source) {
      source = p.run.source;
      fmt::print("{}\n{:<50} {:<22} {:>10} {:>10} {:>8}  {:<6} {:<24} {:>6}  {}\n", source, "run", "plan",
                 "measured", "predicted", "error", "memory", "framework", "host_%",
                 "configuration; where in the source");
    }
    fmt::print("{:<50} {:<22} {:>10} {:>10} {:>+7.1f}%  {:<6} {:<24} {:>6.1f}  {}; {}\n", p.run.name,
               plan_text(p.run), time_text(p.run.measured_s, p.run.measured_s),
               time_text(p.predicted_s, p.run.measured_s), 100 * p.error, p.fits ? "fits" : "OOM",
               p.framework.empty() ? "the cluster's host block" : p.framework, 100 * p.host_bound_share,
               configuration(p.run), p.run.table);
  }
  fmt::print("\n{} runs: mean |error| {:.1f}%, max |error| {:.1f}%\n", errors.count(), errors.mean_pct(),
             errors.max_pct());
  for (const evaluation::SourceAgreement& r : ranks)
    fmt::print("the {} {} runs of {}: mean |error| {:.1f}%, order Spearman {}\n", r.runs,
               to_string(r.measure), r.source, 100 * r.mean_abs_error,
               std::isnan(r.spearman) ? std::string("n/a (the measurements are all equal)")
                                      : fmt::format("{:+.2f}", r.spearman));
  for (const evaluation::PublishedTable& table : tables)
    for (const evaluation::UnexpressedRows& rows : table.unexpressed)
      fmt::print("not expressed, from {}: {}: {}\n", table.source, rows.rows, rows.reason);
  fmt::print("memory: whether paradyse predicts the whole model fits; a layer's time is priced either way\n");
  fmt::print(
      "host_%: of the predicted step, the time the GPU waits for the framework to issue its calls; where it "
      "is large the prediction rests on the framework's host costs\n");
}

void run(const PublishedOptions& options) {
  const std::vector<evaluation::PublishedTable> tables =
      options.table.empty() ? evaluation::bundled_published_tables()
                            : std::vector{evaluation::load_published_table(options.table)};
  std::vector<evaluation::PublishedRun> runs;
  for (const evaluation::PublishedTable& table : tables)
    runs.insert(runs.end(), table.runs.begin(), table.runs.end());
  const std::vector<evaluation::PublishedPrediction> predictions = evaluation::predict_published_runs(runs);
  PercentageErrors errors;
  for (const evaluation::PublishedPrediction& p : predictions) errors.add(p.predicted_s, p.run.measured_s);
  const std::vector<evaluation::SourceAgreement> ranks = evaluation::agreement_by_source(predictions);
  if (options.json)
    print_json(tables, predictions, errors, ranks);
  else
    print_table(tables, predictions, errors, ranks);
}

}  // namespace

void add_published_command(CLI::App& app) {
  auto options = std::make_shared<PublishedOptions>();
  CLI::App* command = app.add_subcommand(
      "published",
      "How far paradyse's predictions are from published measurements of real training runs: for each run of "
      "the bundled tables (or of --table), the measured and predicted time, the error, the mean and max "
      "|error|, whether the predictions order the runs of each measure of each source as the measurements do "
      "(Spearman), and the source's rows a table cannot express, with the reason. Predictions come from the "
      "analytic model on the run's cluster preset and framework (a data-parallel run: its grouped step); the "
      "measurements validate it and are never used to fit it.");
  command
      ->add_option("--table", options->table,
                   "a JSON table of your own measurements instead of the bundled ones (schema: "
                   "evaluation/published_runs.hpp; example: evaluation/published/korthikanti-2022.json)")
      ->check(CLI::ExistingFile);
  command->add_flag("--json", options->json, "print JSON instead of a table");
  command->callback([options] { run(*options); });
}

}  // namespace paradyse::cli
