// A learned model's table gives back, for every uniform plan, exactly the time and peak it predicts.
#include "selector/learned_cost_source.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

#include "selector/policy.hpp"
#include "strategies/library.hpp"

using namespace paradyse;

TEST_CASE("learned cost source: uniform plans cost what the model predicts", "[selector]") {
  const ModelSpec model = load_model("bert-large");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  steps::Estimator estimator(model, cluster);
  steps::Profile profile{model.name, cluster.name, 8, 1, "analytic", {}};
  for (const Strategy* strategy : {&megatron_ts(), &metp()})
    for (int64_t tokens = 1024; tokens <= 32768; tokens *= 2) {
      const steps::Estimate e = estimator.estimate(*strategy, {.tokens = tokens});
      const double saved = estimator.cost_table({{strategy, Recompute::none}}, {.tokens = tokens})
                               .candidates.front()
                               .layer.saved_bytes();
      profile.points.push_back(
          {std::string(strategy->name()), "none", tokens, e.time.total_s, e.memory.peak_bytes, saved});
    }
  const auto path = std::filesystem::temp_directory_path() / "paradyse-learned-source-test.json";
  steps::LearnedModel::fit(profile).save(path.string());
  const steps::LearnedModel learned = steps::LearnedModel::load(path.string());

  selector::LearnedCostSource source(path.string(), model, cluster, 8, 1);
  for (int64_t tokens : {3000, 20000, 100000}) {
    const steps::CostTable table = source.table(MicroBatch::sequence(tokens), selector::all_candidates());
    REQUIRE(table.candidates.size() == 2);  // only what was profiled
    for (int c = 0; c < 2; ++c) {
      const steps::Candidate& candidate = table.candidates[static_cast<std::size_t>(c)];
      const steps::LearnedPrediction p = learned.predict(candidate.strategy->name(), "none", tokens);
      const auto uniform = selector::uniform_choice(table, c);
      CAPTURE(tokens, candidate.name());
      CHECK(table.plan_s(uniform) == Approx(p.iteration_time_s).epsilon(1e-12));
      CHECK(table.plan_peak_bytes(uniform) == Approx(p.peak_memory_bytes).epsilon(1e-12));
      CHECK(candidate.layer.saved_bytes() <= p.saved_bytes_per_layer);
    }
  }
  CHECK_THROWS_WITH(selector::LearnedCostSource(path.string(), load_model("gpt-8l"), cluster, 8, 1),
                    Catch::Contains("fitted for model 'bert-large', not the 'gpt-8l'"));
  CHECK_THROWS_WITH(selector::LearnedCostSource(path.string(), model, cluster, 4, 1),
                    Catch::Contains("fitted for degree '8', not the '4'"));
  CHECK_THROWS_WITH(selector::LearnedCostSource(path.string(), model, cluster, 8, 2),
                    Catch::Contains("fitted for batch '1', not the '2'"));
  std::filesystem::remove(path);
}
