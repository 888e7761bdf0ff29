// Group policies in a compare run (group_compare.hpp): every token of every step is either trained or
// out of memory, a long sequence alone takes every GPU, and there the grouped step (weights gathered
// layer by layer over the job) takes about the time of the ordinary step of the same strategy, whose
// ZeRO-3 gathers move the same bytes.
#include "evaluation/group_compare.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "common/errors.hpp"
#include "evaluation/compare_job.hpp"
#include "evaluation/compare_report.hpp"
#include "steps/estimate.hpp"
#include "strategies/library.hpp"
#include "traces/packing.hpp"
#include "traces/trace.hpp"

namespace paradyse::testing {

TEST_CASE("group policies: every step's tokens trained or out of memory, on both engines", "[evaluation]") {
  const ModelSpec model = load_model("llama-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const std::vector<int64_t> lengths{900, 3000, 120000, 500, 7000, 40000, 2000, 1200, 300, 65000, 800};
  const traces::TrainingSchedule schedule = traces::packed_steps(
      lengths, {.global_batch_tokens = 160000, .micro_batch_tokens = 65536, .quantum = 16});
  double total = 0;
  for (const int64_t length : lengths) total += static_cast<double>(length);
  for (const char* engine_name : {"analytic", "sim"}) {
    evaluation::StepEngine engine(model, cluster, 8, engine_name, 1.05);
    for (const evaluation::GroupPolicy& policy :
         evaluation::parse_group_policies("flexsp,dp-groups,groups")) {
      CAPTURE(engine_name, policy.name);
      evaluation::SequenceLog log;
      const evaluation::PolicyResult r = evaluation::run_group_policy(policy, schedule, engine, {}, &log);
      CHECK(r.trained_tokens + r.oom_tokens == Approx(total));
      CHECK(r.oom_tokens == 0);  // every length here fits 8 GPUs
      CHECK(r.steps == schedule.steps);
      CHECK(r.total_s > 0);
      CHECK(r.rounds >= schedule.steps);
      CHECK(r.mean_imbalance >= 1);
      // No schedule beats the solver's bound on a step in its own model, its own schedule included.
      CHECK(r.solver_lower_bound_s > 0);
      CHECK(r.solver_lower_bound_s <= r.solver_predicted_s);
      double predicted_s = 0;
      for (const evaluation::SequenceResult& step : log[0]) {
        CHECK_FALSE(step.plan.empty());
        CHECK(step.imbalance >= 1);
        CHECK(step.solve_s > 0);
        CHECK(step.lower_bound_s > 0);
        CHECK(step.lower_bound_s <= step.predicted_s * (1 + 1e-12));
        predicted_s += step.predicted_s;
      }
      CHECK(r.solver_predicted_s == Approx(predicted_s).epsilon(1e-12));
    }
  }
}

TEST_CASE("group policies: a sequence no group holds is out of memory, and its step counts in no mean",
          "[evaluation]") {
  const ModelSpec model = load_model("llama-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  evaluation::StepEngine engine(model, cluster, 8, "analytic", 0);
  // Step 0 trains 3000 tokens; step 1 is one sequence of 4M tokens, which 8 A100s cannot hold.
  const int64_t too_long = int64_t{4} << 20;
  const traces::TrainingSchedule schedule = traces::packed_steps(
      {3000, too_long}, {.global_batch_tokens = too_long, .micro_batch_tokens = 65536, .quantum = 16});
  REQUIRE(schedule.steps == 2);
  const evaluation::PolicyResult r =
      evaluation::run_group_policy(evaluation::parse_group_policies("groups").front(), schedule, engine);
  CHECK(r.oom_tokens == Approx(static_cast<double>(too_long)));
  CHECK(r.trained_tokens == Approx(3000));
  CHECK(r.mean_imbalance >= 1);
}

TEST_CASE("group policies: a long sequence alone runs on every GPU, about as fast as the ordinary step",
          "[evaluation]") {
  const ModelSpec model = load_model("llama-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  evaluation::StepEngine engine(model, cluster, 8, "sim", 0);
  const traces::TrainingSchedule schedule = traces::packed_steps(
      {131072}, {.global_batch_tokens = 131072, .micro_batch_tokens = 131072, .quantum = 16});
  evaluation::SequenceLog log;
  const evaluation::PolicyResult flexsp = evaluation::run_group_policy(
      evaluation::parse_group_policies("flexsp").front(), schedule, engine, {}, &log);
  REQUIRE(log[0].size() == 1);
  CHECK(log[0][0].plan == "8");
  const double ordinary =
      engine.step(uniform_plan(ulysses_z(), model.num_layers), MicroBatch::sequence(131072)).seconds;
  CHECK(flexsp.total_s == Approx(ordinary).epsilon(0.10));
}

TEST_CASE("group policies: the solver's model of a step agrees with the analytic engine on 16 nodes",
          "[evaluation]") {
  // gpt-8l on 16 DGX A100 nodes (128 GPUs), the code trace's first sequences in global batches of 1M
  // tokens: each step's time as the solver models it against the analytic engine's time of the
  // grouped step it plans (prefetched gathers, many short documents on small groups, long ones on
  // large groups). Median within 5 %, every step within 10 %. Weights sharded over the job, or over each
  // node (hybrid sharding: each node keeps to its own rounds, and the replicas' sums, once a step, are
  // not in the solver's model).
  const int shard_degree = GENERATE(0, 8);
  CAPTURE(shard_degree);
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 16);
  const int job = 128;
  std::vector<int64_t> lengths = traces::load_trace("github-code-like").lengths;
  lengths.resize(10000);
  for (int64_t& length : lengths) length = std::min<int64_t>(length, int64_t{1} << 20);
  const traces::TrainingSchedule schedule =
      traces::packed_steps(lengths, {.global_batch_tokens = int64_t{1} << 20,
                                     .micro_batch_tokens = 65536,
                                     .quantum = SequenceLayout::required_multiple(job, model.causal)});
  REQUIRE(schedule.steps >= 8);
  evaluation::StepEngine engine(model, cluster, job, "analytic", 0);
  evaluation::SequenceLog log;
  const evaluation::PolicyResult r =
      evaluation::run_group_policy(evaluation::parse_group_policies("groups").front(), schedule, engine,
                                   {.degrees = {}, .shard_degree = shard_degree}, &log);
  REQUIRE(r.oom_tokens == 0);
  std::vector<double> errors;
  for (const evaluation::SequenceResult& step : log[0]) {
    REQUIRE(step.seconds > 0);
    CAPTURE(step.step, step.plan, step.documents, step.predicted_s, step.seconds);
    const double error = std::abs(step.predicted_s / step.seconds - 1);
    CHECK(error <= 0.10);
    errors.push_back(error);
  }
  REQUIRE(errors.size() == static_cast<std::size_t>(schedule.steps));
  std::nth_element(errors.begin(), errors.begin() + errors.size() / 2, errors.end());
  CHECK(errors[errors.size() / 2] <= 0.05);
}

TEST_CASE("group policies: --group-sizes limits the groups a step may form", "[evaluation]") {
  const ModelSpec model = load_model("llama-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  evaluation::StepEngine engine(model, cluster, 8, "analytic", 0);
  const traces::TrainingSchedule schedule =
      traces::packed_steps({900, 3000, 500, 7000, 2000, 1200},
                           {.global_batch_tokens = 65536, .micro_batch_tokens = 65536, .quantum = 16});
  for (const int size : {2, 8}) {
    evaluation::SequenceLog log;
    const evaluation::PolicyResult r = evaluation::run_group_policy(
        evaluation::parse_group_policies("groups").front(), schedule, engine, {.degrees = {size}}, &log);
    REQUIRE(log[0].size() == 1);
    // Rounds of groups of `size` only ("2x2", "8 | 8"): each entry's degree, after any "count x".
    const std::string& layout = log[0][0].plan;
    CAPTURE(layout);
    std::size_t start = 0;
    while (start < layout.size()) {
      const std::size_t end = std::min(layout.find_first_of(",|", start), layout.size());
      std::string entry = layout.substr(start, end - start);
      entry = entry.substr(entry.find('x') == std::string::npos ? 0 : entry.find('x') + 1);
      CHECK(std::stoi(entry) == size);
      start = end + 1;
    }
    CHECK(r.oom_tokens == 0);
  }
}

namespace {
// Two short sequences in one packed step on llama-8l, analytic, with `group_policies`.
evaluation::CompareJob two_sequences(const std::string& group_policies) {
  evaluation::CompareJob job;
  job.lengths = {1000, 2000};
  job.global_batch_tokens = "4K";
  job.micro_batch_tokens = "4K";
  job.group_policies = group_policies;
  job.machine.model = "llama-8l";
  job.engine = "analytic";
  job.policies.policies = "static:ulysses_z";
  return job;
}
}  // namespace

TEST_CASE("group policies: a job whose groups hold no sequence at all is refused before anything runs",
          "[evaluation]") {
  // GPUs that hold the weights sharded over the job and 1 MiB more: no group can gather a layer, so
  // every global batch would fit nowhere.
  evaluation::CompareJob job = two_sequences("flexsp,groups");
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  cluster.gpu.hbm_bytes = cluster.gpu.reserved_bytes +
                          steps::static_memory_bytes(load_model("llama-8l"), 8, WeightLayout::job) +
                          1024.0 * 1024.0;
  job.cluster = cluster;
  CHECK_THROWS_WITH(
      evaluation::run_compare_job(job),
      Catch::Contains("--group-policies: flexsp: priced by static:ulysses_z, not even a sequence of") &&
          Catch::Contains("every global batch would fit nowhere"));
  job.group_sizes = {3};
  CHECK_THROWS_WITH(evaluation::run_compare_job(job),
                    Catch::Contains("--group-sizes: a group of 3 GPUs does not divide"));
}

TEST_CASE("group policies: a shard group is the job or a node, and only for group policies", "[evaluation]") {
  evaluation::CompareJob job = two_sequences("groups");
  job.shard_group = "rack";
  CHECK_THROWS_WITH(evaluation::run_compare_job(job),
                    Catch::Contains("--shard-group: expected job or node, got 'rack'"));
  job.shard_group = "node";
  job.group_policies = "";
  CHECK_THROWS_WITH(evaluation::run_compare_job(job),
                    Catch::Contains("--shard-group: a shard group is for --group-policies"));
}

TEST_CASE("group speedups: the best group policy against the best static and flexsp, on common steps",
          "[evaluation]") {
  // Two steps. static:a trains both (4 micro-batches, 10 s + 10 s); static:b leaves step 1 out of
  // memory; flexsp and groups train each step as one result; groups is faster and takes step 1 whole,
  // flexsp not.
  // Tokens per second: a 2000 / 20 s, b 600 / 5 s, flexsp 480 / 8 s, groups 1500 / 10 s.
  evaluation::CompareRecorder recorder({"static:a", "static:b", "flexsp", "groups"});
  const auto add = [&](std::size_t policy, int64_t step, double seconds, int64_t tokens, bool fits) {
    recorder.add(policy, {.step = step, .tokens = tokens, .seconds = seconds, .fits = fits});
  };
  add(0, 0, 6, 500, true);
  add(0, 0, 4, 500, true);
  add(0, 1, 7, 500, true);
  add(0, 1, 3, 500, true);
  add(1, 0, 5, 600, true);
  add(1, 1, 0, 100, false);
  add(2, 0, 8, 480, true);
  add(2, 1, 0, 100, false);
  add(3, 0, 5, 750, true);
  add(3, 1, 5, 750, true);
  recorder.policy(2).rounds = 2;
  recorder.policy(3).rounds = 3;
  const evaluation::CompareResult result = recorder.finish(hw::load_cluster("dgx-a100"), 8);
  const std::vector<evaluation::Speedup> speedups = evaluation::group_speedups(result);
  REQUIRE(speedups.size() == 3);
  CHECK(speedups[0].policy == "groups");
  CHECK(speedups[0].baseline == "static:b");
  CHECK(speedups[0].tokens_per_s_ratio == Approx(1.25));
  CHECK(speedups[0].common_speedup == Approx(1.0));  // step 0 only: 5 s each
  CHECK(speedups[0].common_steps == 1);
  CHECK(speedups[1].baseline == "static:a");
  CHECK(speedups[1].tokens_per_s_ratio == Approx(1.5));
  CHECK(speedups[1].common_speedup == Approx(2.0));  // 20 s against 10 s over both steps
  CHECK(speedups[1].common_steps == 2);
  CHECK(speedups[2].baseline == "flexsp");
  CHECK(speedups[2].tokens_per_s_ratio == Approx(2.5));
  CHECK(speedups[2].common_speedup == Approx(1.6));  // step 0 only: 8 s against 5 s
  CHECK(speedups[2].common_steps == 1);
  const std::string text = evaluation::group_speedups_text(result);
  CHECK_THAT(text,
             Catch::Contains("groups over static:b (the fastest static): 1.25x tokens/s, 1.00x on the 1 "
                             "steps both train whole"));
  CHECK_THAT(text, Catch::Contains("groups over static:a (the static that trains the most): 1.50x tokens/s, "
                                   "2.00x on the 2 steps"));
  CHECK_THAT(text, Catch::Contains("groups over flexsp: 2.50x tokens/s, 1.60x on the 1 steps"));
}

TEST_CASE("group policies: unknown names are refused, naming the flag", "[evaluation]") {
  CHECK(evaluation::parse_group_policies("").empty());
  CHECK_THROWS_WITH(evaluation::parse_group_policies("flexsp,greedy"),
                    Catch::Contains("--group-policies") && Catch::Contains("'greedy'"));
}

}  // namespace paradyse::testing
