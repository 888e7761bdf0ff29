// The learned cost model's commands end to end: a profile paradyse simulated, a model fitted on it, and
// eval's printed errors recomputed here from the files.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>

#include "steps/estimate.hpp"
#include "steps/learned_model.hpp"
#include "steps/profile.hpp"
#include "tests/experiments/run_paradyse.hpp"

using namespace paradyse;
using namespace paradyse::testing;

namespace {

struct Ape {
  double sum = 0, max = 0;
  int n = 0;
  void add(double predicted, double measured) {
    const double e = 100 * std::abs(predicted - measured) / measured;
    sum += e;
    max = std::max(max, e);
    ++n;
  }
};

}  // namespace

TEST_CASE("costmodel profile, fit and eval: eval's errors are what the files give", "[experiments]") {
  const auto dir = temp_dir();
  const std::string train = (dir / "train.csv").string(), heldout = (dir / "heldout.csv").string(),
                    model_file = (dir / "model.json").string();
  const std::string machine = " --model bert-large --strategy megatron_ts,ulysses_z,metp";
  REQUIRE(
      run_paradyse("costmodel profile" + machine + " --seq 1K,2K,4K,8K,16K,32K --out " + train).exit_code ==
      0);
  REQUIRE(run_paradyse("costmodel profile" + machine + " --seq 3K,12K,64K --out " + heldout).exit_code == 0);
  const RunResult fitted = run_paradyse("costmodel fit --profile " + train + " --out " + model_file);
  REQUIRE(fitted.exit_code == 0);
  CHECK_THAT(fitted.out, Catch::Contains("ulysses_z"));
  const RunResult eval = run_paradyse("costmodel eval --model bert-large --costmodel " + model_file +
                                      " --profile " + heldout + " --json");
  REQUIRE(eval.exit_code == 0);
  const auto j = nlohmann::json::parse(eval.out);

  const steps::Profile profile = steps::read_profile(heldout);
  CHECK(profile.source == "sim");
  REQUIRE(profile.points.size() == 9);
  const steps::LearnedModel learned = steps::LearnedModel::load(model_file);
  steps::Estimator estimator(load_model("bert-large"), hw::load_cluster("dgx-a100"));
  std::map<std::string, Ape> time, memory;
  for (const steps::ProfilePoint& point : profile.points) {
    const steps::LearnedPrediction p = learned.predict(point.strategy, point.recompute, point.seq);
    // 64K lies beyond the profiled 1K..32K, the others inside.
    CHECK(p.extrapolated == (point.seq == 65536));
    const std::string where = p.extrapolated ? "outside" : "inside";
    time["learned " + where].add(p.iteration_time_s, point.iteration_time_s);
    memory["learned " + where].add(p.peak_memory_bytes, point.peak_memory_bytes);
    const steps::Estimate e = estimator.estimate(*find_strategy(point.strategy), {.tokens = point.seq});
    time["analytic " + where].add(e.time.total_s, point.iteration_time_s);
    memory["analytic " + where].add(e.memory.peak_bytes, point.peak_memory_bytes);
  }
  CHECK(j.at("points") == 9);
  for (const char* kind : {"learned", "analytic"}) {
    for (const char* where : {"inside", "outside"}) {
      const std::string key = std::string(kind) + " " + where;
      CAPTURE(key);
      const auto& row = j.at(kind).at(where);
      CHECK(row.at("points") == time[key].n);
      CHECK(row.at("time").at("mean_ape_pct").get<double>() ==
            Approx(time[key].sum / time[key].n).epsilon(1e-9));
      CHECK(row.at("time").at("max_ape_pct").get<double>() == Approx(time[key].max).epsilon(1e-9));
      CHECK(row.at("memory").at("mean_ape_pct").get<double>() ==
            Approx(memory[key].sum / memory[key].n).epsilon(1e-9).margin(1e-12));
      CHECK(row.at("memory").at("max_ape_pct").get<double>() ==
            Approx(memory[key].max).epsilon(1e-9).margin(1e-12));
    }
  }

  SECTION("a cost model fitted for another model or cluster is refused") {
    const RunResult other =
        run_paradyse("plan --model gpt-8l --policy paradyse --seq 4K --costmodel " + model_file);
    CHECK(other.exit_code == 2);
    CHECK_THAT(other.err, Catch::Contains("fitted for model 'bert-large', not the 'gpt-8l' asked for"));
    CHECK(other.out.empty());
    const RunResult nodes = run_paradyse(
        "plan --model bert-large --nodes 2 --policy paradyse --seq 4K --costmodel " + model_file);
    CHECK(nodes.exit_code == 2);
    CHECK_THAT(nodes.err, Catch::Contains("fitted for cluster 'dgx-a100'"));
    const RunResult plans = run_paradyse(
        "plan --model bert-large --policy paradyse,optimal --seq 4K,48K --costmodel " + model_file);
    CHECK(plans.exit_code == 0);
  }
  SECTION("a corrupt model file is refused") {
    {
      std::ofstream corrupt(model_file, std::ios::trunc);
      corrupt << "{\"format\": \"paradyse-learned-cost-model\", \"version\": 1, \"model\": ";
    }
    const RunResult r =
        run_paradyse("plan --model bert-large --policy paradyse --seq 4K --costmodel " + model_file);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(model_file));
  }
  std::filesystem::remove_all(dir);
}
