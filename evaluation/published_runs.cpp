#include "evaluation/published_runs.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string_view>
#include <tuple>

#include "common/errors.hpp"
#include "common/json_input.hpp"
#include "common/limits.hpp"
#include "common/statistics.hpp"
#include "costmodel/program_cost.hpp"
#include "hw_models/cluster.hpp"
#include "hw_models/figure_sources.hpp"
#include "hw_models/framework.hpp"
#include "steps/estimate.hpp"
#include "strategies/grouped_step.hpp"
#include "strategies/sequence_layout.hpp"

namespace paradyse::evaluation {

const std::map<std::string_view, std::string_view>& published_table_files();  // generated

namespace {

using json_input::Json;
using json_input::Object;

constexpr PublishedMeasure kMeasures[] = {PublishedMeasure::layer_forward, PublishedMeasure::layer_backward,
                                          PublishedMeasure::iteration};

std::string measure_names() {
  std::string names;
  for (PublishedMeasure m : kMeasures) names += (names.empty() ? "" : ", ") + std::string(to_string(m));
  return names;
}

using TableModels = std::map<std::string, std::shared_ptr<const std::string>, std::less<>>;

PublishedRun read_run(const Object& run, const std::string& source, const TableModels& models) {
  run.require_keys(
      {"name", "table", "cluster", "model", "strategy", "degree", "seq", "measure", "measured_s"},
      {"framework", "attention_kernel", "attention_implementation", "loss_kernel", "recompute",
       "data_parallel", "batch", "micro_batches", "gradients_clipped", "gradient_reduce_dtype"});
  PublishedRun r;
  r.name = run.string("name");
  r.source = source;
  r.table = run.string("table");
  r.cluster = run.string("cluster");
  if (run.has("framework")) r.framework = hw::non_empty_string(run, "framework");
  if (run.has("attention_implementation"))
    r.attention_implementation = hw::non_empty_string(run, "attention_implementation");
  r.model = run.string("model");
  if (const auto own = models.find(r.model); own != models.end()) r.table_model = own->second;
  if (run.has("attention_kernel")) {
    r.attention_kernel = attention_kernel_named(run.string("attention_kernel"));
    if (!r.attention_kernel)
      run.fail("attention_kernel", "expected flash or unfused, got '" + run.string("attention_kernel") + "'");
  }
  if (run.has("loss_kernel")) {
    r.loss_kernel = loss_kernel_named(run.string("loss_kernel"));
    if (!r.loss_kernel)
      run.fail("loss_kernel", "expected fused or unfused, got '" + run.string("loss_kernel") + "'");
  }
  r.strategy = find_strategy(run.string("strategy"));
  if (r.strategy == nullptr)
    run.fail("strategy", "expected one of " + strategy_names() + ", got '" + run.string("strategy") + "'");
  if (run.has("recompute")) {
    const std::optional<Recompute> recompute = parse_recompute(run.string("recompute"));
    if (!recompute)
      run.fail("recompute", "expected none, selective or full, got '" + run.string("recompute") + "'");
    r.recompute = *recompute;
  }
  const int64_t degree = run.positive_integer("degree");
  if (degree > 1 << 20) run.fail("degree", "expected at most 1048576 GPUs, got " + std::to_string(degree));
  r.degree = static_cast<int>(degree);
  if (run.has("data_parallel")) {
    const int64_t groups = run.positive_integer("data_parallel");
    if (groups > (1 << 16) / degree)
      run.fail("data_parallel", "expected at most 65536 GPUs in all (data_parallel × degree), got " +
                                    std::to_string(groups) + " × " + std::to_string(degree));
    r.data_parallel = static_cast<int>(groups);
  }
  r.seq = run.positive_integer("seq");
  if (r.seq > kMaxSequenceTokens)
    run.fail("seq",
             "expected a length of at most " + max_sequence_tokens_text() + ", got " + std::to_string(r.seq));
  if (run.has("batch")) r.batch = run.positive_integer("batch");
  if (run.has("micro_batches")) r.micro_batches = run.positive_integer("micro_batches");
  if (run.has("gradients_clipped")) r.gradients_clipped = run.boolean("gradients_clipped");
  const std::string measure = run.string("measure");
  bool known = false;
  for (PublishedMeasure m : kMeasures)
    if (to_string(m) == measure) {
      r.measure = m;
      known = true;
    }
  if (!known) run.fail("measure", "expected one of " + measure_names() + ", got '" + measure + "'");
  if (r.data_parallel > 1 && r.measure != PublishedMeasure::iteration)
    run.fail("measure",
             "expected iteration for a run of several data-parallel groups, got '" + measure + "'");
  if (run.has("gradient_reduce_dtype")) {
    const std::string name = run.string("gradient_reduce_dtype");
    const std::optional<DType> dtype = gradient_reduce_dtype_named(name);
    if (!dtype) run.fail("gradient_reduce_dtype", "expected bf16 or fp32, got '" + name + "'");
    if (r.data_parallel < 2)
      run.fail("gradient_reduce_dtype",
               "expected only on a run of several data-parallel groups (data_parallel of 2 or more), whose "
               "step reduce-scatters each layer's gradient");
    r.gradient_reduce_dtype = *dtype;
  }
  r.measured_s = run.positive_number("measured_s");
  return r;
}

// Where a table's own model comes from, for its errors and its source.
std::string table_model_source(const std::string& table, const std::string& name) {
  return table + ", models." + name;
}

TableModels read_models(const Object& table, const std::string& where) {
  TableModels models;
  if (!table.has("models")) return models;
  const Object block = table.object("models");
  for (const auto& [name, config] : block.json().items()) {
    if (!config.is_object()) block.fail(name, "expected the object of a Hugging Face config.json");
    std::string text = config.dump();
    model_from_config(text, name, table_model_source(where, name));  // refused here, naming the table
    models[name] = std::make_shared<const std::string>(std::move(text));
  }
  return models;
}

std::vector<UnexpressedRows> read_unexpressed(const Object& table) {
  std::vector<UnexpressedRows> out;
  if (!table.has("unexpressed")) return out;
  const Json& rows = table.json().at("unexpressed");
  if (!rows.is_array()) table.fail("unexpressed", "expected an array of {\"rows\", \"reason\"}");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Object row(rows[i], table.source(), "unexpressed[" + std::to_string(i) + "]");
    row.require_keys({"rows", "reason"});
    out.push_back({hw::non_empty_string(row, "rows"), hw::non_empty_string(row, "reason")});
  }
  return out;
}

PublishedTable read_table(const Json& json, const std::string& where) {
  const Object table(json, where);
  table.require_keys({"source", "runs"}, {"setup", "models", "unexpressed"});
  PublishedTable out;
  out.source = table.string("source");
  if (table.has("setup")) table.string("setup");  // a string when given
  const TableModels models = read_models(table, where);
  const Json& runs = table.json().at("runs");
  if (!runs.is_array() || runs.empty()) table.fail("runs", "expected a non-empty array of runs");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string place = "runs[" + std::to_string(i) + "]";
    out.runs.push_back(read_run(Object(runs[i], where, place), out.source, models));
    out.runs.back().file = where;
    out.runs.back().place = place;
  }
  out.unexpressed = read_unexpressed(table);
  return out;
}

ModelSpec run_model(const PublishedRun& run) {
  const ModelOverrides overrides{
      .causal = std::nullopt, .attention_kernel = run.attention_kernel, .loss_kernel = run.loss_kernel};
  return run.table_model ? model_from_config(*run.table_model, run.model,
                                             table_model_source(run.file, run.model), overrides)
                         : load_model(run.model, overrides);
}

// The run's cluster, `nodes` nodes of its preset, as its framework and attention implementation run it.
hw::ClusterSpec run_cluster(const PublishedRun& run, int nodes = 1) {
  hw::ClusterSpec cluster = hw::load_cluster(run.cluster, nodes);
  if (!run.framework.empty()) hw::use_framework(cluster, hw::load_framework(run.framework));
  hw::use_attention_implementation(cluster, run.attention_implementation, "attention_implementation");
  return cluster;
}

struct Priced {
  double seconds = 0, host_bound_s = 0;
  bool fits = false;
  std::string framework;
};

// A step of data_parallel groups of `degree` GPUs, each training its own micro-batches, the weights
// sharded over them all: a grouped step of micro_batches rounds, every group alike, so every rank's
// program alike, and rank 0's priced phase by phase.
Priced price_data_parallel(const PublishedRun& run, const ModelSpec& model) {
  const int job = run.data_parallel * run.degree;
  const int gpus_per_node = hw::load_cluster(run.cluster).gpus_per_node;
  hw::ClusterSpec cluster = run_cluster(run, (job + gpus_per_node - 1) / gpus_per_node);
  GroupedStepSpec spec;
  spec.model = &model;
  spec.num_layers = static_cast<int>(model.num_layers);
  StepSpec micro_batch;
  micro_batch.model = &model;
  micro_batch.tokens = SequenceLayout::padded_length(run.seq, run.degree, model.causal);
  micro_batch.batch = run.batch;
  micro_batch.gradients_clipped = run.gradients_clipped;
  micro_batch.plan = uniform_plan(*run.strategy, model.num_layers, run.recompute);
  Round round;
  for (int group = 0; group < run.data_parallel; ++group)
    round.push_back({group * run.degree, run.degree, micro_batch});
  spec.rounds.assign(static_cast<std::size_t>(run.micro_batches), round);
  spec.gradient_reduce_dtype = run.gradient_reduce_dtype;
  check_grouped_step(spec, job);
  const costmodel::OpTimer timer(cluster, job);
  const costmodel::ProgramPrice price = costmodel::price_program(
      trace_grouped_step(spec, 0, job), timer, steps::static_memory_bytes(model, job, WeightLayout::job),
      cluster.gpu.allocator_fragmentation);
  return {price.seconds, price.host_bound_s, price.peak_bytes <= cluster.tensor_capacity_bytes(),
          cluster.framework};
}

}  // namespace

std::string_view to_string(PublishedMeasure measure) {
  switch (measure) {
    case PublishedMeasure::layer_forward:
      return "layer_forward";
    case PublishedMeasure::layer_backward:
      return "layer_backward";
    case PublishedMeasure::iteration:
      return "iteration";
  }
  return "?";
}

std::vector<PublishedTable> bundled_published_tables() {
  std::vector<PublishedTable> tables;
  for (const auto& [name, text] : published_table_files()) {
    const std::string where = "bundled table " + std::string(name);
    tables.push_back(read_table(json_input::parse(text, where), where));
  }
  return tables;
}

std::vector<PublishedRun> bundled_published_runs() {
  std::vector<PublishedRun> runs;
  for (const PublishedTable& table : bundled_published_tables())
    runs.insert(runs.end(), table.runs.begin(), table.runs.end());
  return runs;
}

PublishedTable load_published_table(const std::string& path) {
  return read_table(json_input::load_file(path), path);
}

std::vector<PublishedRun> load_published_runs(const std::string& path) {
  return load_published_table(path).runs;
}

std::vector<PublishedPrediction> predict_published_runs(const std::vector<PublishedRun>& runs) {
  std::vector<PublishedPrediction> out;
  // Runs of one model, kernel, cluster, framework and attention implementation share an estimator, and so its
  // traced layers.
  std::map<std::tuple<std::string, std::optional<AttentionKernel>, std::optional<LossKernel>, std::string,
                      std::string, std::string>,
           std::unique_ptr<steps::Estimator>>
      estimators;
  for (const PublishedRun& run : runs) {
    // A run whose model, cluster, degree or length cannot be priced is named by its file and place.
    try {
      if (run.data_parallel > 1) {
        const Priced priced = price_data_parallel(run, run_model(run));
        out.push_back({.run = run,
                       .predicted_s = priced.seconds,
                       .error = (priced.seconds - run.measured_s) / run.measured_s,
                       .fits = priced.fits,
                       .framework = priced.framework,
                       .host_bound_share = priced.host_bound_s / priced.seconds});
        continue;
      }
      // A table's own model is the table's: another table may give the name another model.
      const std::string model_key = run.table_model ? run.file + ": " + run.model : run.model;
      std::unique_ptr<steps::Estimator>& found =
          estimators[{model_key, run.attention_kernel, run.loss_kernel, run.cluster, run.framework,
                      run.attention_implementation}];
      if (!found) found = std::make_unique<steps::Estimator>(run_model(run), run_cluster(run));
      steps::Estimator& estimator = *found;
      const steps::EstimateRequest request{.tokens = run.seq,
                                           .degree = run.degree,
                                           .batch = run.batch,
                                           .micro_batches = run.micro_batches,
                                           .gradients_clipped = run.gradients_clipped};
      const steps::Estimate estimate = estimator.estimate(*run.strategy, request, run.recompute);
      PublishedPrediction p{.run = run,
                            .predicted_s = estimate.time.total_s,
                            .fits = estimate.fits,
                            .framework = estimator.cluster().framework,
                            .host_bound_share = estimate.time.host_bound_s / estimate.time.total_s};
      if (run.measure != PublishedMeasure::iteration) {
        const steps::CostTable table = estimator.cost_table({{run.strategy, run.recompute}}, request);
        PARADYSE_CHECK(table.candidates.size() == 1, "no layer cost for a plan the estimate priced");
        const steps::LayerCost& layer = table.candidates.front().layer;
        p.predicted_s = run.measure == PublishedMeasure::layer_forward ? layer.forward_s : layer.backward_s;
      }
      p.error = (p.predicted_s - run.measured_s) / run.measured_s;
      out.push_back(std::move(p));
    } catch (const InputError& e) {
      if (run.file.empty()) throw;
      // A run's own field, refused when priced, is named under the run: "runs[1].attention_implementation".
      if (e.file().empty() && !e.field().empty() && !e.field().starts_with("--"))
        throw InputError(run.file, 0, run.place + "." + e.field(), e.message());
      throw InputError(run.file, 0, run.place, e.what());
    }
  }
  return out;
}

std::vector<SourceAgreement> agreement_by_source(const std::vector<PublishedPrediction>& predictions) {
  std::vector<SourceAgreement> out;
  std::vector<std::string> sources;  // in the order of their first run
  for (const PublishedPrediction& p : predictions)
    if (std::find(sources.begin(), sources.end(), p.run.source) == sources.end())
      sources.push_back(p.run.source);
  for (const std::string& source : sources)
    for (PublishedMeasure measure : kMeasures) {
      std::vector<double> measured, predicted;
      double abs_errors = 0;
      for (const PublishedPrediction& p : predictions)
        if (p.run.source == source && p.run.measure == measure) {
          measured.push_back(p.run.measured_s);
          predicted.push_back(p.predicted_s);
          abs_errors += std::abs(p.error);
        }
      if (measured.size() < 2) continue;
      const int runs = static_cast<int>(measured.size());
      out.push_back({source, measure, runs, spearman(measured, predicted), abs_errors / runs});
    }
  return out;
}

}  // namespace paradyse::evaluation
