#include "evaluation/published_runs.hpp"

#include <map>
#include <memory>
#include <string_view>
#include <tuple>

#include "common/errors.hpp"
#include "common/json_input.hpp"
#include "common/limits.hpp"
#include "common/statistics.hpp"
#include "hw_models/cluster.hpp"
#include "steps/estimate.hpp"

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

PublishedRun read_run(const Object& run, const std::string& source) {
  run.require_keys(
      {"name", "table", "cluster", "model", "strategy", "degree", "seq", "measure", "measured_s"},
      {"attention_kernel", "loss_kernel", "recompute", "batch", "micro_batches", "gradients_clipped"});
  PublishedRun r;
  r.name = run.string("name");
  r.source = source;
  r.table = run.string("table");
  r.cluster = run.string("cluster");
  r.model = run.string("model");
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
  r.measured_s = run.positive_number("measured_s");
  return r;
}

std::vector<PublishedRun> read_table(const Json& json, const std::string& where) {
  const Object table(json, where);
  table.require_keys({"source", "runs"}, {"setup"});
  const std::string source = table.string("source");
  if (table.has("setup")) table.string("setup");  // a string when given
  const Json& runs = table.json().at("runs");
  if (!runs.is_array() || runs.empty()) table.fail("runs", "expected a non-empty array of runs");
  std::vector<PublishedRun> out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string place = "runs[" + std::to_string(i) + "]";
    out.push_back(read_run(Object(runs[i], where, place), source));
    out.back().file = where;
    out.back().place = place;
  }
  return out;
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

std::vector<PublishedRun> bundled_published_runs() {
  std::vector<PublishedRun> runs;
  for (const auto& [name, text] : published_table_files()) {
    const std::string where = "bundled table " + std::string(name);
    std::vector<PublishedRun> table = read_table(json_input::parse(text, where), where);
    runs.insert(runs.end(), table.begin(), table.end());
  }
  return runs;
}

std::vector<PublishedRun> load_published_runs(const std::string& path) {
  return read_table(json_input::load_file(path), path);
}

std::vector<PublishedPrediction> predict_published_runs(const std::vector<PublishedRun>& runs) {
  std::vector<PublishedPrediction> out;
  // Runs of one model, kernel and cluster share an estimator, and so its traced layers.
  std::map<std::tuple<std::string, std::optional<AttentionKernel>, std::optional<LossKernel>, std::string>,
           std::unique_ptr<steps::Estimator>>
      estimators;
  for (const PublishedRun& run : runs) {
    // A run whose model, cluster, degree or length cannot be priced is named by its file and place.
    try {
      std::unique_ptr<steps::Estimator>& found =
          estimators[{run.model, run.attention_kernel, run.loss_kernel, run.cluster}];
      if (!found)
        found = std::make_unique<steps::Estimator>(
            load_model(run.model, {.causal = std::nullopt,
                                   .attention_kernel = run.attention_kernel,
                                   .loss_kernel = run.loss_kernel}),
            hw::load_cluster(run.cluster));
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
      throw InputError(run.file, 0, run.place, e.what());
    }
  }
  return out;
}

std::vector<RankAgreement> rank_agreement(const std::vector<PublishedPrediction>& predictions) {
  std::vector<RankAgreement> out;
  for (PublishedMeasure measure : kMeasures) {
    std::vector<double> measured, predicted;
    for (const PublishedPrediction& p : predictions)
      if (p.run.measure == measure) {
        measured.push_back(p.run.measured_s);
        predicted.push_back(p.predicted_s);
      }
    if (measured.size() < 2) continue;
    out.push_back({measure, static_cast<int>(measured.size()), spearman(measured, predicted)});
  }
  return out;
}

}  // namespace paradyse::evaluation
