// A compare run's accounting: a sequence out of memory is not trained, adds no time, and ends its
// policy's curve (first out of memory, longest before it); a policy with no plan counts as out of
// memory; the time of the trained sequences is the engine's time of each.
#include "evaluation/compare.hpp"
#include "evaluation/compare_job.hpp"
#include "evaluation/compare_report.hpp"

#include <catch2/catch.hpp>

#include <zlib.h>

#include <fstream>
#include <sstream>

#include "hw_models/cluster.hpp"
#include "selector/cost_source.hpp"
#include "sim/simulator.hpp"
#include "steps/estimate.hpp"
#include "strategies/library.hpp"
#include "tests/temp_dir.hpp"

namespace paradyse::testing {
namespace {

struct Fixture {
  ModelSpec model = load_model("gpt-8l");
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  selector::AnalyticCostSource source{model, cluster, 8, 1};
  evaluation::StepEngine engine{model, cluster, 8, "analytic", 0};
  steps::Estimator estimator{model, cluster};

  double seconds(const Strategy& strategy, int64_t tokens) {
    return estimator.estimate(uniform_plan(strategy, model.num_layers), {.tokens = tokens, .degree = 8})
        .time.total_s;
  }
  bool fits(const Strategy& strategy, int64_t tokens) {
    return estimator.estimate(uniform_plan(strategy, model.num_layers), {.tokens = tokens, .degree = 8}).fits;
  }
};

}  // namespace

TEST_CASE("compare: sequences out of memory are not trained and end the curve", "[evaluation][compare]") {
  Fixture f;
  // megatron_ts holds full-sequence activations: 256K tokens of gpt-8l do not fit in 80 GB; metp's do.
  REQUIRE(f.fits(megatron_ts(), 8192));
  REQUIRE_FALSE(f.fits(megatron_ts(), 262144));
  REQUIRE(f.fits(metp(), 262144));
  const std::vector<int64_t> lengths = {4096, 262144, 8192, 262144, 2048};
  auto ts = selector::make_policy("static:megatron_ts", f.source);
  auto lean = selector::make_policy("static:metp", f.source);
  evaluation::SequenceLog log;
  const evaluation::CompareResult result = evaluation::run_compare(
      {ts.get(), lean.get()}, traces::unpacked_steps(lengths, 1), f.engine, {}, 24, &log);
  REQUIRE(result.policies.size() == 2);
  CHECK_FALSE(result.interpolation.has_value());  // the analytic engine interpolates nothing

  const evaluation::PolicyResult& r = result.policies[0];
  CHECK(r.policy == "static:megatron_ts");
  CHECK(r.trained == 3);
  CHECK(r.oom_count == 2);
  CHECK(r.first_oom == 1);
  CHECK(r.max_len_before_oom == 4096);  // 8192 trained too, but after the first out of memory
  CHECK(r.trained_tokens == 4096 + 8192 + 2048);
  CHECK(r.total_s == Approx(f.seconds(megatron_ts(), 4096) + f.seconds(megatron_ts(), 8192) +
                            f.seconds(megatron_ts(), 2048)));
  CHECK_FALSE(log[0][1].fits);
  CHECK(log[0][1].seconds == 0);
  CHECK(r.plan_switches == 0);
  CHECK(r.mfu > 0);
  CHECK(r.mfu < 1);

  const evaluation::PolicyResult& m = result.policies[1];
  CHECK(m.trained == 5);
  CHECK(m.oom_count == 0);
  CHECK(m.first_oom == -1);
  CHECK(m.max_len_before_oom == 262144);
  // Same tokens, more time: metp's throughput is below megatron_ts's on what both trained.
  const auto [ts_s, metp_s] = evaluation::common_time_s(result, r, m);
  CHECK(ts_s == Approx(r.total_s));
  CHECK(metp_s > ts_s);
}

TEST_CASE("compare: a policy with no plan counts the sequence out of memory", "[evaluation][compare]") {
  Fixture f;
  selector::ParadyseOptions no_fallback;
  no_fallback.fallback = false;
  auto policy = selector::make_policy("paradyse", f.source, no_fallback);
  // 4M tokens fit no plan of gpt-8l on one node.
  evaluation::SequenceLog log;
  const evaluation::CompareResult result = evaluation::run_compare(
      {policy.get()}, traces::unpacked_steps({4096, 4 * 1024 * 1024}, 1), f.engine, {}, 24, &log);
  const evaluation::PolicyResult& r = result.policies.front();
  CHECK(log[0][1].plan.empty());
  CHECK_FALSE(log[0][1].fits);
  CHECK(r.trained == 1);
  CHECK(r.oom_count == 1);
  CHECK(r.first_oom == 1);
  CHECK(r.total_s == Approx(f.seconds(megatron_ts(), 4096)));  // paradyse runs megatron_ts when it fits
}

}  // namespace paradyse::testing

namespace paradyse::testing {

TEST_CASE("compare: a global batch steps the optimizer once for its sequences", "[evaluation][compare]") {
  Fixture f;
  auto ts = selector::make_policy("static:megatron_ts", f.source);
  // Two steps of three: [4096, 262144 (out of memory), 8192] and [2048, 16384].
  const std::vector<int64_t> lengths = {4096, 262144, 8192, 2048, 16384};
  evaluation::SequenceLog one_log, three_log;
  const evaluation::PolicyResult one =
      evaluation::run_compare({ts.get()}, traces::unpacked_steps(lengths, 1), f.engine, {}, 0, &one_log)
          .policies[0];
  const evaluation::PolicyResult three =
      evaluation::run_compare({ts.get()}, traces::unpacked_steps(lengths, 3), f.engine, {}, 0, &three_log)
          .policies[0];
  CHECK(one.steps == 4);
  CHECK(three.steps == 2);
  CHECK(three.trained == one.trained);
  const Plan plan = uniform_plan(megatron_ts(), f.model.num_layers);
  const double optimizer_s = f.estimator.estimate(plan, {.tokens = 4096, .degree = 8}).time.optimizer_s;
  REQUIRE(optimizer_s > 0);
  // 4096 and 2048 accumulate and give their optimizer step back; 8192 and 16384 end their steps.
  CHECK(three_log[0][0].seconds == Approx(one_log[0][0].seconds - optimizer_s));
  CHECK(three_log[0][2].seconds == one_log[0][2].seconds);
  CHECK(three_log[0][3].seconds == Approx(one_log[0][3].seconds - optimizer_s));
  CHECK(three.total_s == Approx(one.total_s - 2 * optimizer_s));
  // Against the estimator's own global batch of two micro-batches of 4K: the same time.
  const evaluation::PolicyResult pair =
      evaluation::run_compare({ts.get()}, traces::unpacked_steps({4096, 4096}, 2), f.engine, {}, 0)
          .policies[0];
  CHECK(pair.total_s ==
        Approx(f.estimator.estimate(plan, {.tokens = 4096, .degree = 8, .micro_batches = 2}).time.total_s));
}

}  // namespace paradyse::testing

namespace paradyse::testing {

TEST_CASE("compare: packed micro-batches are priced by their documents, one optimizer step per global batch",
          "[evaluation][compare]") {
  Fixture f;
  auto ts = selector::make_policy("static:megatron_ts", f.source);
  // One step of two micro-batches of 8K padded tokens: {6000, 2000} and {5000, 3000}.
  const traces::TrainingSchedule schedule = traces::packed_steps(
      {6000, 2000, 5000, 3000}, {.global_batch_tokens = 16000, .micro_batch_tokens = 8192, .quantum = 16});
  REQUIRE(schedule.micro_batches == std::vector<std::vector<int64_t>>{{6000, 2000}, {5000, 3000}});
  evaluation::SequenceLog log;
  const evaluation::PolicyResult packed =
      evaluation::run_compare({ts.get()}, schedule, f.engine, {}, 0, &log).policies[0];
  CHECK(packed.steps == 1);
  REQUIRE(packed.trained == 2);
  CHECK(log[0][0].documents == 2);
  const Plan plan = uniform_plan(megatron_ts(), f.model.num_layers);
  auto estimate = [&](std::vector<int64_t> documents) {
    return f.estimator.estimate(plan, {.degree = 8, .documents = std::move(documents)});
  };
  const steps::Estimate first = estimate({6000, 2000}), second = estimate({5000, 3000});
  // The first micro-batch accumulates and gives its optimizer step back; the second ends the step.
  CHECK(log[0][0].seconds == Approx(first.time.total_s - first.time.optimizer_s));
  CHECK(log[0][1].seconds == Approx(second.time.total_s));
  CHECK(packed.model_flops == Approx(first.model_flops + second.model_flops));
  // Packing attends within documents: faster than the same tokens as one sequence.
  CHECK(first.time.total_s < f.seconds(megatron_ts(), 8000));
}

TEST_CASE(
    "compare: the simulator prices a packed micro-batch within 2 % of simulating it, its memory exactly",
    "[evaluation][compare]") {
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  evaluation::StepEngine engine(model, cluster, 8, "sim", 1.05);
  const Plan plan = uniform_plan(ulysses_z(), model.num_layers);
  const MicroBatch micro_batch{{20000, 9000, 3000, 700}};
  const evaluation::StepEngine::Step step = engine.step(plan, micro_batch);
  const sim::SimulationResult direct =
      engine.simulator()->simulate(plan, {.degree = 8, .documents = micro_batch.documents});
  CHECK(step.seconds == Approx(direct.iteration_time_s).epsilon(0.02));
  // Memory is the fold of the packed micro-batch's own allocations, the same to the byte.
  CHECK(step.peak_bytes == direct.peak_memory_bytes);
  CHECK(engine.method().find("packed micro-batch") != std::string::npos);
}

TEST_CASE("compare: simulations run in several processes give the one-process outputs byte for byte",
          "[evaluation][compare]") {
  evaluation::CompareJob job;
  job.trace = "github-code-like";
  job.max_len = "16K";
  job.limit = 300;
  job.policies.policies = "static:megatron_ts,static:ulysses_z,paradyse";
  const auto outputs = [&](int jobs) {
    job.jobs = jobs;
    TempDir dir;
    int64_t simulations = 0;
    {
      evaluation::CompareOutputs written(dir.path().string());
      const evaluation::CompareJobResult run = evaluation::run_compare_job(job, {}, &written.sink());
      written.finish(run.result, run.description);
      simulations = run.result.simulations;
    }
    std::string text;
    for (const char* file : {"per_sequence.csv", "summary.json"}) {
      std::ifstream in(dir.path() / file);
      std::stringstream bytes;
      bytes << in.rdbuf();
      text += bytes.str();
    }
    return std::pair{text, simulations};
  };
  const auto [one, simulations] = outputs(1);
  REQUIRE(simulations > 2 * 16);  // more than two processes' worth
  CHECK(outputs(3).first == one);
}

}  // namespace paradyse::testing

namespace paradyse::testing {
namespace {

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The text without the group solver's times, which are wall-clock times: summary.json's "solve_s"
// lines, and the last column of per_sequence.csv.
std::string without_solver_times(const std::string& text) {
  std::string kept;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"solve_s\"") != std::string::npos) continue;
    kept += line.substr(0, line.find_last_of(',') == std::string::npos || line.starts_with(' ')
                               ? line.size()
                               : line.find_last_of(','));
    kept += '\n';
  }
  return kept;
}

std::string gunzip(const std::filesystem::path& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  REQUIRE(file != nullptr);
  std::string text;
  char buffer[1 << 16];
  for (int got = 0; (got = gzread(file, buffer, sizeof buffer)) > 0;)
    text.append(buffer, static_cast<std::size_t>(got));
  gzclose(file);
  return text;
}

}  // namespace

TEST_CASE("compare: a run timed a few steps at a time writes the files of the run timed at once",
          "[evaluation][compare]") {
  evaluation::CompareJob job;
  job.engine = "analytic";
  job.trace = "github-code-like";
  job.max_len = "16K";
  job.limit = 800;
  job.policies.policies = "static:megatron_ts,static:metp,paradyse";
  job.global_batch_tokens = "64K";
  job.micro_batch_tokens = "16K";
  job.group_policies = "flexsp";
  const auto outputs = [&](int64_t chunk, evaluation::PerSequenceFormat format) {
    job.chunk_micro_batches = chunk;
    TempDir dir;
    evaluation::CompareOutputs written(dir.path().string(), format);
    const evaluation::CompareJobResult run = evaluation::run_compare_job(job, {}, &written.sink());
    written.finish(run.result, run.description);
    std::map<std::string, std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
      if (!entry.path().string().ends_with(".png"))
        files[entry.path().filename().string()] = without_solver_times(
            entry.path().extension() == ".gz" ? gunzip(entry.path()) : file_text(entry.path()));
    return files;
  };
  const auto at_once = outputs(int64_t{1} << 18, evaluation::PerSequenceFormat::csv);
  REQUIRE(at_once.contains("per_sequence.csv"));
  const std::string& rows = at_once.at("per_sequence.csv");
  REQUIRE(std::count(rows.begin(), rows.end(), '\n') > 4 * 10 * 4);  // every policy over several chunks
  const auto in_chunks = outputs(10, evaluation::PerSequenceFormat::csv);
  CHECK(in_chunks.at("per_sequence.csv") == at_once.at("per_sequence.csv"));
  CHECK(in_chunks.at("summary.json") == at_once.at("summary.json"));
  // Compressed, the same rows; left out, the same summary.
  job.group_policies = "";
  const auto plain = outputs(10, evaluation::PerSequenceFormat::csv);
  const auto compressed = outputs(10, evaluation::PerSequenceFormat::csv_gz);
  CHECK_FALSE(compressed.contains("per_sequence.csv"));
  CHECK(compressed.at("per_sequence.csv.gz") == plain.at("per_sequence.csv"));
  const auto none = outputs(10, evaluation::PerSequenceFormat::none);
  CHECK_FALSE(none.contains("per_sequence.csv"));
  CHECK_FALSE(none.contains("per_sequence.csv.gz"));
  CHECK(none.at("summary.json") == plain.at("summary.json"));
}

}  // namespace paradyse::testing
