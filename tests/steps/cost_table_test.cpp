// The cost table prices every plan, mixed ones included, exactly as the estimate does.
#include "steps/cost_table.hpp"

#include <catch2/catch.hpp>

#include <random>

#include "steps/estimate.hpp"
#include "strategies/library.hpp"

using namespace paradyse;

TEST_CASE("cost table: plan time and peak equal the estimate's, for uniform and mixed plans", "[costmodel]") {
  for (const char* model_name : {"gpt-8l", "llama3-8b"}) {
    const ModelSpec model = load_model(model_name);
    steps::Estimator estimator(model, hw::load_cluster("dgx-a100"));
    std::vector<std::pair<const Strategy*, Recompute>> wanted;
    for (const Strategy* strategy : strategies_for(model, 8))
      for (Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full})
        wanted.emplace_back(strategy, recompute);
    std::mt19937 random(3);
    for (int64_t tokens : {3000, 65536}) {
      const steps::CostTable table = estimator.cost_table(wanted, {.tokens = tokens});
      REQUIRE(table.num_layers == model.num_layers);
      REQUIRE(table.candidates.size() == wanted.size());  // every strategy runs both at degree 8
      std::uniform_int_distribution<int> pick(0, static_cast<int>(table.candidates.size()) - 1);
      for (int trial = 0; trial < 12; ++trial) {
        steps::CostTable::Choice choice;
        for (int l = 0; l < table.num_layers; ++l) choice.push_back(trial < 3 ? trial : pick(random));
        const Plan plan = table.plan(choice);
        CAPTURE(model_name, tokens, plan_name(plan));
        const steps::Estimate estimate = estimator.estimate(plan, {.tokens = tokens});
        CHECK(table.plan_s(choice) == Approx(estimate.time.total_s).epsilon(1e-12));
        CHECK(table.plan_peak_bytes(choice) == Approx(estimate.memory.peak_bytes).epsilon(1e-12));
        CHECK(table.fits(choice) == estimate.fits);
        // The exact plan search relies on this: a layer's backward frees what its forward kept.
        for (int c : choice) {
          const steps::LayerCost& layer = table.candidates[static_cast<std::size_t>(c)].layer;
          CHECK(layer.backward.delta_bytes == -layer.forward.delta_bytes);
          CHECK(layer.optimizer.delta_bytes == 0);
        }
      }
    }
  }
}

TEST_CASE("cost table: a strategy the degree does not allow is left out", "[costmodel]") {
  steps::Estimator estimator(load_model("gpt-8l"), hw::load_cluster("dgx-a100"));
  const std::vector<std::pair<const Strategy*, Recompute>> wanted{{&megatron_ts(), Recompute::none},
                                                                  {&ulysses_z(), Recompute::none}};
  const steps::CostTable six = estimator.cost_table(wanted, {.tokens = 4096, .degree = 6});
  CHECK(six.candidates.size() == 2);  // 96 heads over 6 ranks
  CHECK(six.find(ulysses_z()).value() == 1);
  CHECK(!six.find(metp()).has_value());
  const steps::CostTable five = estimator.cost_table(wanted, {.tokens = 4096, .degree = 5});
  CHECK(five.candidates.empty());  // 96 heads do not split over 5 ranks
}

TEST_CASE("cost table: two-part mixes' peaks are the fold's to the bit, whole bytes or not", "[costmodel]") {
  // The analytic model's tables (whole bytes), then the same with fractional and signed figures.
  const ModelSpec model = load_model("llama3-8b");
  steps::Estimator estimator(model, hw::load_cluster("dgx-a100"));
  std::vector<std::pair<const Strategy*, Recompute>> wanted;
  for (const Strategy* strategy : strategies_for(model, 8))
    for (Recompute recompute : {Recompute::none, Recompute::full}) wanted.emplace_back(strategy, recompute);
  std::mt19937 random(11);
  std::uniform_real_distribution<double> bytes(-3e9, 3e9);
  for (int64_t tokens : {2048, 131072}) {
    steps::CostTable table = estimator.cost_table(wanted, {.tokens = tokens});
    for (const bool whole : {true, false}) {
      if (!whole) {
        for (steps::Candidate& candidate : table.candidates)
          for (steps::MemoryStep* phase :
               {&candidate.layer.forward, &candidate.layer.backward, &candidate.layer.optimizer})
            *phase = {bytes(random), bytes(random) / 3};
        table.step.head = {bytes(random) / 7, bytes(random) / 7};
      }
      const int n = static_cast<int>(table.candidates.size());
      for (int first = 0; first < n; ++first)
        for (int rest = 0; rest < n; ++rest) {
          const steps::TwoPartPeaks peaks(table, first, rest);
          for (int m = 0; m <= table.num_layers; ++m) {
            steps::CostTable::Choice choice(static_cast<std::size_t>(table.num_layers), rest);
            std::fill_n(choice.begin(), m, first);
            CAPTURE(tokens, whole, first, rest, m);
            REQUIRE(peaks.peak_bytes(m) == table.plan_peak_bytes(choice));
          }
        }
    }
  }
}
