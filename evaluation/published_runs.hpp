// Published measurements of real training runs, and how far paradyse's predictions are from them.
//
// A table is a JSON file: its "source" (the paper, or the repository), the "setup" the runs share,
// optional "models" (name → the text of a Hugging Face config.json, for models that are no preset),
// "runs", each naming the configuration in paradyse's terms (cluster, framework, model, attention
// kernel and its implementation, strategy, recompute, degree, data-parallel groups, seq, batch,
// micro-batches, whether the gradients were clipped) and what was measured: one layer's forward or backward,
// or a whole iteration, in seconds; and optional "unexpressed": the source's rows paradyse cannot express,
// each with the reason, so that none is dropped silently. These rows validate the model; no constant is
// fitted to them (hardware constants come from component measurements, hw_models/presets).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strategies/model.hpp"
#include "strategies/strategy.hpp"

namespace paradyse::evaluation {

enum class PublishedMeasure { layer_forward, layer_backward, iteration };
std::string_view to_string(PublishedMeasure measure);

struct PublishedRun {
  std::string name;    // "22B layer forward, TP 8"
  std::string source;  // the table's source
  std::string table;   // where in it: "Table 4, Baseline no recompute"
  std::string file;    // the file it was read from, and its place there: "runs[3]"
  std::string place;
  std::string cluster;
  std::string framework;  // a preset or file that issued the run's calls; empty: the cluster's own
  // The fused attention kernel the run ran, one the cluster's GPU has figures for; empty: its own curves.
  std::string attention_implementation;
  std::string model;
  // The table's own model named `model`, if any: its config.json's text, read as load_model reads a file.
  std::shared_ptr<const std::string> table_model;
  std::optional<AttentionKernel> attention_kernel;  // the model's own when absent
  std::optional<LossKernel> loss_kernel;            // likewise
  const Strategy* strategy = nullptr;
  Recompute recompute = Recompute::none;
  int degree = 0;
  // Groups of `degree` GPUs that train micro-batches of their own at once, the weights sharded over all
  // of them (FSDP's FULL_SHARD, a grouped step): data_parallel × degree GPUs. Iterations only.
  int data_parallel = 1;
  int64_t seq = 0;
  int64_t batch = 1;
  int64_t micro_batches = 1;
  bool gradients_clipped = false;  // the measured steps scaled their gradients (their norm above the limit)
  // What a data-parallel run sums and reduce-scatters its gradients in (GroupedStepSpec).
  DType gradient_reduce_dtype = DType::bf16;
  PublishedMeasure measure = PublishedMeasure::iteration;
  double measured_s = 0;
};

// Rows of a source that a table leaves out, and why.
struct UnexpressedRows {
  std::string rows;
  std::string reason;
};

struct PublishedTable {
  std::string source;
  std::vector<PublishedRun> runs;
  std::vector<UnexpressedRows> unexpressed;
};

// The tables bundled with paradyse, in the order of their names.
std::vector<PublishedTable> bundled_published_tables();
std::vector<PublishedRun> bundled_published_runs();  // their runs, in order
// A table file of the same schema; throws InputError naming the file and field on bad input.
PublishedTable load_published_table(const std::string& path);
std::vector<PublishedRun> load_published_runs(const std::string& path);  // its runs

struct PublishedPrediction {
  PublishedRun run;
  double predicted_s = 0;
  double error = 0;   // (predicted − measured) / measured
  bool fits = false;  // whether paradyse predicts the whole model fits in memory
  // The framework whose host costs priced the run (its cluster's), "" for the cluster file's own host
  // block; and the share of the predicted step in which the GPU waits for the host to issue its calls
  // (the estimate's host_bound over its total): the regime, host-bound where it is large.
  std::string framework;
  double host_bound_share = 0;
};

// Each run priced by the analytic model (Estimator): a layer's forward or backward from the cost
// table, an iteration from the estimate. Throws InputError when a run's configuration cannot be
// expressed (its cluster, model or strategy at that degree).
std::vector<PublishedPrediction> predict_published_runs(const std::vector<PublishedRun>& runs);

// How the predictions of one measure of one source (of two runs or more) agree with the measurements:
// in order, and in size.
struct SourceAgreement {
  std::string source;
  PublishedMeasure measure;
  int runs = 0;
  double spearman = 0;        // Spearman's ρ of predicted against measured times (ties: average ranks)
  double mean_abs_error = 0;  // the mean of |error| (a fraction)
};
std::vector<SourceAgreement> agreement_by_source(const std::vector<PublishedPrediction>& predictions);

}  // namespace paradyse::evaluation
