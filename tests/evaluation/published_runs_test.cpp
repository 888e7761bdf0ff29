#include "evaluation/published_runs.hpp"

#include <catch2/catch.hpp>
#include <fstream>

#include "common/errors.hpp"
#include "hw_models/cluster.hpp"
#include "hw_models/framework.hpp"
#include "steps/estimate.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;
using namespace paradyse::evaluation;

namespace {

std::string write_table(const testing::TempDir& dir, const std::string& runs) {
  const std::string path = dir.file("table.json");
  std::ofstream(path) << R"({"source": "a test", "runs": [)" << runs << "]}";
  return path;
}

const std::string kRun =
    R"("name": "one", "table": "T1", "cluster": "dgx-a100", "model": "gpt-8l", "strategy": "megatron_ts",
       "degree": 8, "seq": 4096)";

}  // namespace

TEST_CASE("published runs: a layer's predicted time is what one more layer adds to a whole estimate",
          "[evaluation]") {
  // Two routes to one number: the cost table's price of one layer, and the difference of the
  // estimates of the model with L and with L − 1 layers.
  for (const PublishedRun& run : bundled_published_runs()) {
    if (run.measure == PublishedMeasure::iteration) continue;
    INFO(run.name);
    ModelSpec model = load_model(
        run.model,
        {.causal = std::nullopt, .attention_kernel = run.attention_kernel, .loss_kernel = run.loss_kernel});
    const steps::EstimateRequest request{.tokens = run.seq, .degree = run.degree, .batch = run.batch};
    hw::ClusterSpec cluster = hw::load_cluster(run.cluster);
    if (!run.framework.empty()) hw::use_framework(cluster, hw::load_framework(run.framework));
    hw::use_attention_implementation(cluster, run.attention_implementation, "attention_implementation");
    const steps::Estimate whole =
        steps::Estimator(model, cluster).estimate(*run.strategy, request, run.recompute);
    model.num_layers -= 1;
    const steps::Estimate fewer =
        steps::Estimator(model, cluster).estimate(*run.strategy, request, run.recompute);
    const double layer_s = run.measure == PublishedMeasure::layer_forward
                               ? whole.time.forward_s - fewer.time.forward_s
                               : whole.time.backward_s - fewer.time.backward_s;
    const std::vector<PublishedPrediction> predicted = predict_published_runs({run});
    CHECK(predicted.at(0).predicted_s == Approx(layer_s).epsilon(1e-6));
    CHECK(predicted.at(0).error == Approx(layer_s / run.measured_s - 1).epsilon(1e-6));
  }
}

TEST_CASE("published runs: the bundled tables are expressible and have every measure", "[evaluation]") {
  const std::vector<PublishedRun> runs = bundled_published_runs();
  REQUIRE(runs.size() >= 12);
  const std::vector<PublishedPrediction> predictions = predict_published_runs(runs);
  for (const PublishedPrediction& p : predictions) {
    INFO(p.run.name);
    CHECK(p.predicted_s > 0);
    CHECK_FALSE(p.run.source.empty());
    CHECK_FALSE(p.run.table.empty());
  }
  // Each source's measures ordered on their own: Korthikanti's three, llm-foundry's iterations on H100s
  // and on A100s, torchtitan's on A100s.
  const std::vector<SourceAgreement> ranks = agreement_by_source(predictions);
  REQUIRE(ranks.size() == 6);
  for (const SourceAgreement& r : ranks) {
    CHECK(r.runs >= 2);
    CHECK(r.spearman >= -1);
    CHECK(r.spearman <= 1);
  }
}

TEST_CASE("published runs: a measure with one run has no agreement of its own", "[evaluation]") {
  const testing::TempDir dir;
  const std::string path = write_table(dir, "{" + kRun + R"(, "measure": "iteration", "measured_s": 0.3})");
  const std::vector<PublishedPrediction> predictions = predict_published_runs(load_published_runs(path));
  REQUIRE(predictions.size() == 1);
  CHECK(agreement_by_source(predictions).empty());
}

TEST_CASE("published runs: each source's measure gets its own mean |error| beside its order",
          "[evaluation]") {
  const auto prediction = [](const std::string& source, PublishedMeasure measure, double measured_s,
                             double predicted_s) {
    PublishedPrediction p;
    p.run.source = source;
    p.run.measure = measure;
    p.run.measured_s = measured_s;
    p.predicted_s = predicted_s;
    p.error = predicted_s / measured_s - 1;
    return p;
  };
  // A: +10 % and -20 %, in order; B: +50 % and 0 %, out of order; B's one layer forward has no entry.
  const std::vector<PublishedPrediction> predictions{
      prediction("A", PublishedMeasure::iteration, 1.0, 1.1),
      prediction("B", PublishedMeasure::iteration, 2.0, 3.0),
      prediction("A", PublishedMeasure::iteration, 2.0, 1.6),
      prediction("B", PublishedMeasure::iteration, 2.5, 2.5),
      prediction("B", PublishedMeasure::layer_forward, 0.1, 0.3)};
  const std::vector<SourceAgreement> agreement = agreement_by_source(predictions);
  REQUIRE(agreement.size() == 2);
  CHECK(agreement[0].source == "A");
  CHECK(agreement[0].runs == 2);
  CHECK(agreement[0].mean_abs_error == Approx(0.15));
  CHECK(agreement[0].spearman == Approx(1.0));
  CHECK(agreement[1].source == "B");
  CHECK(agreement[1].mean_abs_error == Approx(0.25));
  CHECK(agreement[1].spearman == Approx(-1.0));
}

TEST_CASE("published runs: a bad table names its file and field", "[evaluation]") {
  const testing::TempDir dir;
  struct Case {
    std::string runs, field, expected;
  };
  const std::vector<Case> cases{
      {"{" + kRun + R"(, "measure": "step", "measured_s": 0.3})", "runs[0].measure", "layer_forward"},
      {"{" + kRun + R"(, "measure": "iteration", "measured_ms": 300})", "runs[0]", "measured"},
      {"{" + kRun + R"(, "measure": "iteration", "measured_s": -1})", "runs[0].measured_s", ""},
      {R"({"name": "x", "table": "T", "cluster": "dgx-a100", "model": "gpt-8l", "strategy": "megatron_zz",
          "degree": 8, "seq": 4096, "measure": "iteration", "measured_s": 1})",
       "runs[0].strategy", "megatron_tp"},
      {"{" + kRun + R"(, "recompute": "some", "measure": "iteration", "measured_s": 1})", "runs[0].recompute",
       "selective"},
      {"{" + kRun + R"(, "gradients_clipped": "yes", "measure": "iteration", "measured_s": 1})",
       "runs[0].gradients_clipped", "true or false"},
      {"{" + kRun + R"(, "data_parallel": 2, "gradient_reduce_dtype": "fp16", "measure": "iteration",
          "measured_s": 1})",
       "runs[0].gradient_reduce_dtype", "bf16 or fp32"},
      {"{" + kRun + R"(, "gradient_reduce_dtype": "fp32", "measure": "iteration", "measured_s": 1})",
       "runs[0].gradient_reduce_dtype", "data_parallel"},
      {"", "runs", "non-empty"}};
  for (const Case& c : cases) {
    INFO(c.runs);
    const std::string path = write_table(dir, c.runs);
    try {
      load_published_runs(path);
      FAIL("no error");
    } catch (const InputError& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Catch::Contains(path) && Catch::Contains(c.field) && Catch::Contains(c.expected));
    }
  }
}

TEST_CASE(
    "published runs: a run names the attention kernel it ran, which its cluster's GPU must have figures for",
    "[evaluation]") {
  const testing::TempDir dir;
  std::string run = kRun;
  run.replace(run.find("\"seq\": 4096"), 11, "\"seq\": 16384");
  const auto predicted_s = [&](const std::string& extra) {
    const std::string path =
        write_table(dir, "{" + run + extra + R"(, "measure": "iteration", "measured_s": 1})");
    return predict_published_runs(load_published_runs(path)).at(0).predicted_s;
  };
  const std::string triton = R"(, "attention_implementation": "flash-attention-triton")";
  CHECK(predicted_s(triton) > predicted_s(""));
  // A data-parallel run prices its grouped step with the same kernel.
  CHECK(predicted_s(triton + R"(, "data_parallel": 2)") > predicted_s(R"(, "data_parallel": 2)"));

  const std::string path = write_table(
      dir, "{" + run + R"(, "attention_implementation": "cudnn", "measure": "iteration", "measured_s": 1})");
  CHECK_THROWS_WITH(predict_published_runs(load_published_runs(path)),
                    Catch::Contains(path) && Catch::Contains("runs[0].attention_implementation") &&
                        Catch::Contains("flash-attention-triton"));
  const std::string empty = write_table(
      dir, "{" + run + R"(, "attention_implementation": "", "measure": "iteration", "measured_s": 1})");
  CHECK_THROWS_WITH(load_published_runs(empty), Catch::Contains("runs[0].attention_implementation"));
}

TEST_CASE("published runs: a configuration paradyse cannot express is refused with the reason",
          "[evaluation]") {
  const testing::TempDir dir;
  // gpt-8l's 96 heads are not divisible by 5: no rank would own whole heads.
  std::string run = kRun;
  run.replace(run.find("\"degree\": 8"), 11, "\"degree\": 5");
  const std::string path = write_table(dir, "{" + run + R"(, "measure": "iteration", "measured_s": 1})");
  CHECK_THROWS_WITH(predict_published_runs(load_published_runs(path)), Catch::Contains("degree 5"));
}

TEST_CASE("published runs: a run whose steps clipped their gradients is priced with the scale",
          "[evaluation]") {
  const testing::TempDir dir;
  const std::string measured = R"(, "measure": "iteration", "measured_s": 1})";
  const std::string path =
      write_table(dir, "{" + kRun + measured + ", {" + kRun + R"(, "gradients_clipped": true)" + measured);
  const std::vector<PublishedPrediction> predictions = predict_published_runs(load_published_runs(path));
  REQUIRE(predictions.size() == 2);
  CHECK_FALSE(predictions[0].run.gradients_clipped);
  CHECK(predictions[1].run.gradients_clipped);
  // One more read and write of every fp32 gradient: more time, never less.
  CHECK(predictions[1].predicted_s > predictions[0].predicted_s);
}

namespace {

// A GPT-2-style config of a small model, as a table or a config.json holds it.
const std::string kSmallConfig =
    R"({"model_type": "gpt2", "n_embd": 1024, "n_head": 16, "n_layer": 4, "n_inner": 4096, "vocab_size": 32000,
        "activation_function": "gelu", "attn_pdrop": 0.0, "resid_pdrop": 0.0})";

std::string data_parallel_run(const std::string& model, int groups,
                              const std::string& measure = "iteration") {
  return R"({"name": "fsdp", "table": "T", "cluster": "dgx-h100", "model": ")" + model +
         R"(", "strategy": "ulysses_z", "degree": 1, "data_parallel": )" + std::to_string(groups) +
         R"(, "seq": 2048, "batch": 2, "micro_batches": 2, "measure": ")" + measure +
         R"(", "measured_s": 1})";
}

}  // namespace

TEST_CASE("published runs: a table's own model prices as the same config.json does", "[evaluation]") {
  const testing::TempDir dir;
  const std::string config = dir.file("small.json");
  std::ofstream(config) << kSmallConfig;
  const std::string path = dir.file("table.json");
  std::ofstream(path) << R"({"source": "a test", "models": {"small": )" << kSmallConfig << "}, \"runs\": ["
                      << data_parallel_run("small", 8) << ", " << data_parallel_run(config, 8) << "]}";
  const std::vector<PublishedPrediction> predictions = predict_published_runs(load_published_runs(path));
  REQUIRE(predictions.size() == 2);
  CHECK(predictions[0].run.table_model);
  CHECK_FALSE(predictions[1].run.table_model);
  CHECK(predictions[0].predicted_s == predictions[1].predicted_s);
}

TEST_CASE("published runs: data-parallel groups share the weights' gathers and gradients' reductions",
          "[evaluation]") {
  const testing::TempDir dir;
  const std::string path = dir.file("table.json");
  std::ofstream(path) << R"({"source": "a test", "models": {"small": )" << kSmallConfig << "}, \"runs\": ["
                      << data_parallel_run("small", 8) << ", " << data_parallel_run("small", 16) << "]}";
  const std::vector<PublishedPrediction> predictions = predict_published_runs(load_published_runs(path));
  REQUIRE(predictions.size() == 2);
  // Every GPU trains the same tokens; over two nodes each gather and reduction crosses the NICs, so
  // the step takes longer, and the weights' shards are halved.
  CHECK(predictions[0].fits);
  CHECK(predictions[1].predicted_s > predictions[0].predicted_s);
  // A single-GPU step of the same micro-batches takes no gathers at all: faster than either.
  const std::string one = dir.file("one.json");
  std::ofstream(one) << R"({"source": "a test", "models": {"small": )" << kSmallConfig << R"(}, "runs": [
      {"name": "one", "table": "T", "cluster": "dgx-h100", "model": "small", "strategy": "ulysses_z",
       "degree": 1, "seq": 2048, "batch": 2, "micro_batches": 2, "measure": "iteration", "measured_s": 1}]})";
  CHECK(predict_published_runs(load_published_runs(one)).at(0).predicted_s < predictions[0].predicted_s);
}

TEST_CASE("published runs: a data-parallel run measures iterations, and unexpressed rows need a reason",
          "[evaluation]") {
  const testing::TempDir dir;
  const std::string layer = dir.file("layer.json");
  std::ofstream(layer) << R"({"source": "a test", "models": {"small": )" << kSmallConfig << "}, \"runs\": ["
                       << data_parallel_run("small", 8, "layer_forward") << "]}";
  CHECK_THROWS_WITH(load_published_runs(layer),
                    Catch::Contains(layer) && Catch::Contains("runs[0].measure") &&
                        Catch::Contains("expected iteration for a run of several data-parallel groups"));
  const std::string reasonless = dir.file("reasonless.json");
  std::ofstream(reasonless)
      << R"({"source": "a test", "runs": [{)" << kRun
      << R"(, "measure": "iteration", "measured_s": 1}], "unexpressed": [{"rows": "3"}]})";
  CHECK_THROWS_WITH(load_published_runs(reasonless), Catch::Contains("unexpressed[0].reason"));
  const std::string listed = dir.file("listed.json");
  std::ofstream(listed) << R"({"source": "a test", "runs": [{)" << kRun
                        << R"(, "measure": "iteration", "measured_s": 1}],
      "unexpressed": [{"rows": "line 3", "reason": "FP8"}]})";
  const PublishedTable table = load_published_table(listed);
  REQUIRE(table.unexpressed.size() == 1);
  CHECK(table.unexpressed[0].rows == "line 3");
  CHECK(table.unexpressed[0].reason == "FP8");
}

TEST_CASE(
    "published runs: torchtitan's eager RMSNorm, SwiGLU and rotary embedding add their counted bytes to "
    "a 70B step",
    "[evaluation]") {
  std::vector<PublishedRun> runs;
  for (const PublishedRun& run : bundled_published_runs())
    if (run.name == "llama3-70b 8192, 64 GPUs, batch 1, full recompute") runs.push_back(run);
  REQUIRE(runs.size() == 1);
  REQUIRE(runs[0].framework == "torchtitan-rmsnorm");
  runs.push_back(runs[0]);
  runs[1].framework = "eager-pytorch-h100-host";  // the same host, every call fused
  const std::vector<PublishedPrediction> predictions = predict_published_runs(runs);
  REQUIRE(predictions.size() == 2);
  // Llama 3 70B: 80 layers, hidden 8192, SwiGLU 28672; 8192 tokens a GPU; each layer's forward twice
  // (full recomputation) and its backward once. Per element: RMSNorm 36 bytes forward and 92 backward
  // eager against 4 and 6 fused, two a layer and the final one; SwiGLU 10 and 18 against 6 and 10 on
  // the product; the rotary embedding of q and k (64 and 8 heads of 128) 20.1 and 20.3 against 4 and 4.
  // All of it on the compute stream of a compute-bound step.
  const double tokens = 8192, norm_elements = tokens * 8192, product_elements = tokens * 28672,
               rotated_elements = tokens * (8192 + 1024);
  const double layer_bytes = 2 * norm_elements * (2 * (36 - 4) + (92 - 6)) +
                             product_elements * (2 * (10 - 6) + (18 - 10)) +
                             rotated_elements * (2 * (20.1 - 4) + (20.3 - 4));
  const double final_norm_bytes = norm_elements * ((36 - 4) + (92 - 6));
  const double added_s =
      (80 * layer_bytes + final_norm_bytes) / hw::load_cluster("dgx-a100").gpu.hbm_bytes_per_second;
  CHECK(predictions[0].predicted_s - predictions[1].predicted_s == Approx(added_s).epsilon(0.02));
}
