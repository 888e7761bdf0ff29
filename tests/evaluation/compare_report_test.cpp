// summary.json: the run, the engine, each policy's totals under its name, and the interpolation error
// only when times were interpolated; not the wall time, so that two identical runs agree.
#include "evaluation/compare_report.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "evaluation/compare.hpp"
#include "tests/json_keys.hpp"

namespace paradyse::evaluation {

using testing::json_keys;

TEST_CASE("summary.json: the run, the engine and each policy's totals", "[evaluation][compare]") {
  const RunDescription run{.model = "gpt-8l",
                           .cluster = "dgx-a100",
                           .degree = 8,
                           .global_batch = 16,
                           .trace = "github-code-like",
                           .trace_about = "bundled",
                           .preparation = "sorted",
                           .sorted = true,
                           .wall_s = 3.5};
  CompareResult result{
      .engine = "analytic", .method = "estimates", .interpolation = {}, .simulations = 0, .policies = {}};
  PolicyResult policy{.policy = "static:metp", .results = 3};
  policy.trained = 2;
  policy.total_s = 5;
  policy.host_bound_s = 2;
  policy.tokens_per_second = 1000;
  policy.mfu = 0.25;
  policy.oom_count = 1;
  policy.max_len_before_oom = 4096;
  policy.plan_switches = 4;
  policy.steps = 7;
  policy.strategy_time_shares = {{"metp", 1.0}};
  result.policies.push_back(policy);

  const std::set<std::string> run_and_engine = {"model",
                                                "cluster",
                                                "framework",
                                                "attention_implementation",
                                                "degree",
                                                "global_batch",
                                                "global_batch_tokens",
                                                "micro_batch_tokens",
                                                "shard_degree",
                                                "gradient_reduce_dtype",
                                                "trace",
                                                "trace_about",
                                                "engine",
                                                "method",
                                                "preparation",
                                                "policies"};
  nlohmann::json j = summary_json(result, run);
  CHECK(json_keys(j) == run_and_engine);
  CHECK(j.at("trace_about") == "bundled");
  CHECK(j.at("global_batch") == 16);
  CHECK(j.at("policies") == nlohmann::json{{"static:metp",
                                            {{"total_time_s", 5.0},
                                             {"host_bound_share", 0.4},
                                             {"tokens_per_s", 1000.0},
                                             {"mfu", 0.25},
                                             {"oom_count", 1},
                                             {"oom_tokens", 0.0},
                                             {"max_len_before_oom", 4096},
                                             {"switches", 4},
                                             {"strategy_time_shares", {{"metp", 1.0}}},
                                             {"steps", 7},
                                             {"trained", 2},
                                             {"micro_batches", 3},
                                             {"sequences", 3}}}});

  result.interpolation.emplace();
  result.interpolation->add(102, 100);
  result.simulations = 7;
  j = summary_json(result, run);
  CHECK(json_keys(j).size() == run_and_engine.size() + 2);
  CHECK(j.at("simulations") == 7);
  CHECK(j.at("interpolation_error").at("samples") == 1);
  CHECK(j.at("interpolation_error").at("max_pct").get<double>() == Approx(2));
}

TEST_CASE("compare: each strategy's share of the trained time, a micro-batch's time split over its layers",
          "[evaluation][compare]") {
  CompareRecorder recorder({"paradyse-2d"});
  recorder.add(0, {.index = 0, .step = 0, .tokens = 4096, .plan = "megatron_ts", .seconds = 3, .fits = true});
  // Four layers, one of them megatron_ts, three usp_u8 (one with full recomputation): 1 s and 3 s.
  recorder.add(0, {.index = 1,
                   .step = 1,
                   .tokens = 65536,
                   .plan = "megatron_ts,usp_u8,usp_u8:full,usp_u8",
                   .seconds = 4,
                   .fits = true});
  recorder.add(0, {.index = 2, .step = 2, .tokens = 1 << 20, .plan = "metp", .seconds = 0, .fits = false});
  CompareResult result = recorder.finish(hw::load_cluster("dgx-a100"), 8);
  const PolicyResult& policy = result.policies.front();
  CHECK(policy.total_s == 7);
  CHECK(policy.steps == 2);
  CHECK(policy.plan_switches == 1);
  REQUIRE(policy.strategy_time_shares.size() == 2);
  CHECK(policy.strategy_time_shares.at("megatron_ts") == Approx(4.0 / 7));
  CHECK(policy.strategy_time_shares.at("usp_u8") == Approx(3.0 / 7));
  CHECK_THAT(summary_table(result), Catch::Contains("megatron_ts 57%, usp_u8 43%"));
}

TEST_CASE("compare: a policy's plot curves stay bounded however long the run, first and last points kept",
          "[evaluation][compare]") {
  CompareRecorder recorder({"static:metp"});
  const int64_t count = 300000;
  for (int64_t i = 0; i < count; ++i)
    recorder.add(0, {.index = i,
                     .step = i,
                     .tokens = 1 + i,
                     .padded_tokens = 16 * (1 + i),
                     .plan = "metp",
                     .seconds = 1,
                     .fits = true});
  const CompareResult result = recorder.finish(hw::load_cluster("dgx-a100"), 8);
  const PolicyCurves& curves = result.policies.front().curves;
  CHECK(curves.cumulative.size() >= PolicyCurves::kPoints);
  CHECK(curves.cumulative.size() <= 2 * PolicyCurves::kPoints + 1);
  CHECK(curves.cumulative.front().position == 1);
  CHECK(curves.cumulative.back().position == count);
  CHECK(curves.cumulative.back().seconds == count);  // the time up to the last micro-batch
  for (std::size_t i = 1; i < curves.cumulative.size(); ++i) {
    CHECK(curves.cumulative[i].position > curves.cumulative[i - 1].position);
    CHECK(curves.cumulative[i].seconds == static_cast<double>(curves.cumulative[i].position));  // 1 s each
  }
  CHECK(curves.step_by_length.size() <= PolicyCurves::kLengths);
  CHECK(curves.step_by_length.size() >= PolicyCurves::kLengths / 4);  // plenty for a plot
  CHECK(curves.step_by_length.begin()->first == 16);                  // short lengths stay exact
  CHECK(curves.step_by_length.rbegin()->first <= 16 * count);
  CHECK(curves.step_by_length.rbegin()->first > 15 * count);
}

}  // namespace paradyse::evaluation
