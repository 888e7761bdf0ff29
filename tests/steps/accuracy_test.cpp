// The cost models' accuracy against a held-out profile: points are paired by strategy, recompute and
// length, split at the learned model's profiled range, and both files must describe the model asked.
#include "steps/accuracy.hpp"

#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "steps/estimate.hpp"
#include "strategies/library.hpp"

namespace paradyse::testing {
namespace {

// A profile of the analytic model itself: its errors against this profile must be exactly 0.
steps::Profile analytic_profile(const ModelSpec& model, const hw::ClusterSpec& cluster,
                                const std::vector<int64_t>& lengths) {
  steps::Estimator estimator(model, cluster);
  steps::Profile profile{model.name, cluster.name, 8, 1, "analytic", {}};
  for (const Strategy* strategy : {&megatron_ts(), &ulysses_z()})
    for (int64_t tokens : lengths) {
      const steps::Estimate e =
          estimator.estimate(uniform_plan(*strategy, model.num_layers), {.tokens = tokens, .degree = 8});
      profile.points.push_back(
          {std::string(strategy->name()), "none", tokens, e.time.total_s, e.memory.peak_bytes, 1.0});
    }
  return profile;
}

}  // namespace

TEST_CASE("accuracy: held-out points are paired and split at the profiled range", "[costmodel][accuracy]") {
  const ModelSpec model = load_model("bert-large");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  // Below bert-large's 30,522-token vocabulary, where the embedding and head run vocabulary-parallel
  // all along (at the vocabulary's size they switch to gathering the tables, and memory steps).
  std::vector<int64_t> fitted;
  for (int64_t s = 1024; s <= 14336; s += 1024) fitted.push_back(s);
  const steps::LearnedModel learned = steps::LearnedModel::fit(analytic_profile(model, cluster, fitted));

  // 3,000 tokens is inside 1K–14K; 24K and 28K are beyond it; a strategy the learned model does not
  // know is left out.
  steps::Profile heldout = analytic_profile(model, cluster, {3000, 24576, 28672});
  heldout.points.push_back({"megatron_cz", "none", 4096, 1.0, 1.0, 1.0});
  const steps::AccuracyReport report =
      steps::evaluate_accuracy(learned, "learned.json", heldout, "heldout.csv", model, cluster);
  CHECK(report.points == 6);
  CHECK(report.learned.inside.time.count() == 2);
  CHECK(report.learned.outside.time.count() == 4);
  CHECK(report.analytic.inside.memory.count() == 2);
  CHECK(report.analytic.outside.memory.count() == 4);
  // The analytic model predicts its own profile exactly: time paired with time, memory with memory.
  CHECK(report.analytic.inside.time.max_pct() == 0);
  CHECK(report.analytic.outside.time.max_pct() == 0);
  CHECK(report.analytic.inside.memory.max_pct() == 0);
  CHECK(report.analytic.outside.memory.max_pct() == 0);
  // Memory is nearly linear in the length: the forest interpolates it and the AIC polynomial
  // extrapolates it to within a few percent at twice the profiled range.
  CHECK(report.learned.inside.memory.max_pct() < 5);
  CHECK(report.learned.outside.memory.max_pct() < 5);
}

TEST_CASE("accuracy: files of another model, cluster or degree are refused, naming the field",
          "[costmodel][accuracy]") {
  const ModelSpec model = load_model("bert-large");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const steps::LearnedModel learned =
      steps::LearnedModel::fit(analytic_profile(model, cluster, {1024, 2048, 4096, 8192, 16384}));
  steps::Profile heldout = analytic_profile(model, cluster, {3000});

  SECTION("another model asked") {
    CHECK_THROWS_WITH(
        steps::evaluate_accuracy(learned, "learned.json", heldout, "heldout.csv", load_model("gpt-8l"),
                                 cluster),
        Catch::Contains("learned.json: field 'model'") && Catch::Contains("'gpt-8l' was asked for"));
  }
  SECTION("a profile of another degree") {
    heldout.degree = 4;
    CHECK_THROWS_WITH(
        steps::evaluate_accuracy(learned, "learned.json", heldout, "heldout.csv", model, cluster),
        Catch::Contains("heldout.csv: field 'degree'"));
  }
  SECTION("no point to compare") {
    heldout.points = {{"megatron_cz", "none", 4096, 1.0, 1.0, 1.0}};
    CHECK_THROWS_AS(steps::evaluate_accuracy(learned, "learned.json", heldout, "heldout.csv", model, cluster),
                    InputError);
  }
}

}  // namespace paradyse::testing
