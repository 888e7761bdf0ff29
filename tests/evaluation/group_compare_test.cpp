// Group policies in a compare run (group_compare.hpp): every token of every step is either trained or
// out of memory, a long sequence alone takes every GPU, and there the grouped step (weights gathered
// layer by layer over the job) takes about the time of the ordinary step of the same strategy, whose
// ZeRO-3 gathers move the same bytes.
#include "evaluation/group_compare.hpp"

#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "costmodel/estimate.hpp"
#include "evaluation/compare_job.hpp"
#include "strategies/library.hpp"
#include "traces/packing.hpp"

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
      const evaluation::PolicyResult r = evaluation::run_group_policy(policy, schedule, engine);
      CHECK(r.trained_tokens + r.oom_tokens == Approx(total));
      CHECK(r.oom_tokens == 0);  // every length here fits 8 GPUs
      CHECK(r.steps == schedule.steps);
      CHECK(r.total_s > 0);
      CHECK(r.rounds >= schedule.steps);
      CHECK(r.mean_imbalance >= 1);
      for (const evaluation::SequenceResult& step : r.sequences) {
        CHECK_FALSE(step.plan.empty());
        CHECK(step.imbalance >= 1);
        CHECK(step.solve_s > 0);
      }
    }
  }
}

TEST_CASE("group policies: a long sequence alone runs on every GPU, about as fast as the ordinary step",
          "[evaluation]") {
  const ModelSpec model = load_model("llama-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  evaluation::StepEngine engine(model, cluster, 8, "sim", 0);
  const traces::TrainingSchedule schedule = traces::packed_steps(
      {131072}, {.global_batch_tokens = 131072, .micro_batch_tokens = 131072, .quantum = 16});
  const evaluation::PolicyResult flexsp =
      evaluation::run_group_policy(evaluation::parse_group_policies("flexsp").front(), schedule, engine);
  REQUIRE(flexsp.sequences.size() == 1);
  CHECK(flexsp.sequences[0].plan == "8");
  const double ordinary =
      engine.step(uniform_plan(ulysses_z(), model.num_layers), MicroBatch::sequence(131072)).seconds;
  CHECK(flexsp.total_s == Approx(ordinary).epsilon(0.10));
}

TEST_CASE("group policies: --group-sizes limits the groups a step may form", "[evaluation]") {
  const ModelSpec model = load_model("llama-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  evaluation::StepEngine engine(model, cluster, 8, "analytic", 0);
  const traces::TrainingSchedule schedule =
      traces::packed_steps({900, 3000, 500, 7000, 2000, 1200},
                           {.global_batch_tokens = 65536, .micro_batch_tokens = 65536, .quantum = 16});
  for (const int size : {2, 8}) {
    const evaluation::PolicyResult r = evaluation::run_group_policy(
        evaluation::parse_group_policies("groups").front(), schedule, engine, {.degrees = {size}});
    REQUIRE(r.sequences.size() == 1);
    // Rounds of groups of `size` only ("2x2", "8 | 8"): each entry's degree, after any "count x".
    const std::string& layout = r.sequences[0].plan;
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

TEST_CASE("group policies: a job whose groups hold no sequence at all is refused before anything runs",
          "[evaluation]") {
  // GPUs that hold the weights sharded over the job and 1 MiB more: no group can gather a layer, so
  // every global batch would fit nowhere.
  evaluation::CompareJob job;
  job.lengths = {1000, 2000};
  job.global_batch_tokens = "4K";
  job.micro_batch_tokens = "4K";
  job.group_policies = "flexsp,groups";
  job.machine.model = "llama-8l";
  job.engine = "analytic";
  job.policies.policies = "static:ulysses_z";
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  cluster.gpu.hbm_bytes = cluster.gpu.reserved_bytes +
                          costmodel::static_memory_bytes(load_model("llama-8l"), 8, WeightLayout::job) +
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

TEST_CASE("group policies: unknown names are refused, naming the flag", "[evaluation]") {
  CHECK(evaluation::parse_group_policies("").empty());
  CHECK_THROWS_WITH(evaluation::parse_group_policies("flexsp,greedy"),
                    Catch::Contains("--group-policies") && Catch::Contains("'greedy'"));
}

}  // namespace paradyse::testing
