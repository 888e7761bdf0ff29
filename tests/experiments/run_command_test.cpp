// `paradyse run`: real training steps in separate processes, and the inputs it refuses before starting
// any. (A rank that dies mid-run: tests/real_backend/launcher_test.cpp.)
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <set>

#include "common/csv.hpp"
#include "steps/profile.hpp"
#include "strategies/library.hpp"
#include "strategies/training_step.hpp"
#include "tests/experiments/run_paradyse.hpp"
#include "tests/temp_dir.hpp"

namespace paradyse::testing {

TEST_CASE("run: every strategy's processes train to the same loss", "[real][cli]") {
  // Same weights (degree-independent), same tokens, float32: the strategies differ only in rounding.
  double first_loss = 0;
  for (const char* plan :
       {"megatron_ts", "megatron_cz", "ulysses_z", "colossal_z", "metp", "metp,megatron_ts"}) {
    INFO("plan " << plan);
    const RunResult r =
        run_paradyse(std::string("run --ranks 2 --model tiny-llama --seq 64 --steps 1 --warmup 0 "
                                 "--dtype fp32 --json --plan ") +
                     plan);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["ranks"] == 2);
    CHECK(j["communicator"] == "gloo");
    const auto& m = j["lengths"][0];
    CHECK(m["seq"] == 64);
    CHECK(m["peak_memory_bytes"].get<double>() > 0);
    CHECK(m["layer_forward_s"].size() == 2);
    const double loss = m["loss_per_token"].get<double>();
    if (first_loss == 0) first_loss = loss;
    CHECK(loss == Approx(first_loss).epsilon(1e-5));
  }
}

TEST_CASE("run --recompute offload: the same loss, one layer's activations fewer on the device",
          "[real][cli]") {
  const auto run = [](const std::string& recompute) {
    const RunResult r = run_paradyse(
        "run --ranks 2 --model tiny-gpt --seq 1024 --steps 1 --warmup 0 --dtype bf16 "
        "--json --plan ulysses_z --recompute " +
        recompute);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out)["lengths"][0];
  };
  const auto kept = run("none");
  const auto offloaded = run("offload");
  CHECK(offloaded["loss_per_token"].get<double>() ==
        Approx(kept["loss_per_token"].get<double>()).epsilon(1e-6));
  // The device's peak falls by what the tracer's memory timeline says it does (the simulator's figure;
  // bf16, whose bytes the tracer counts).
  const ModelSpec model = load_model("tiny-gpt");
  const auto traced_peak = [&](Recompute recompute) {
    StepSpec spec;
    spec.model = &model;
    spec.tokens = 1024;
    spec.plan = uniform_plan(ulysses_z(), model.num_layers, recompute);
    const Program program = trace_training_step(spec, 0, 2);
    double live = 0, peak = 0;
    for (const MemoryEvent& event : program.memory)
      peak = std::max(peak, live += static_cast<double>(event.bytes));
    return peak;
  };
  const double predicted = traced_peak(Recompute::none) - traced_peak(Recompute::offload);
  const double fall = kept["peak_memory_bytes"].get<double>() - offloaded["peak_memory_bytes"].get<double>();
  CAPTURE(predicted, fall);
  CHECK(predicted > 0);
  CHECK(fall == Approx(predicted).epsilon(0.05));
}

TEST_CASE("run: writes a profile the learned cost model reads", "[real][cli]") {
  TempDir dir;
  const std::string path = dir.file("profile.csv");
  const RunResult r = run_paradyse(
      "run --ranks 2 --model tiny-gpt --layers 1 --seq 32,64 --steps 1 --plan ulysses_z --profile " + path);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const steps::Profile profile = steps::read_profile(path);
  CHECK(profile.source == "real");
  CHECK(profile.degree == 2);
  REQUIRE(profile.points.size() == 2);
  CHECK(profile.points[1].seq == 64);
  CHECK(profile.points[1].strategy == "ulysses_z");
  CHECK(profile.points[1].iteration_time_s > 0);
}

TEST_CASE("run: --ops writes the ops of the last step as CSV", "[real][cli]") {
  TempDir dir;
  const std::string path = dir.file("ops, last step.csv");
  const RunResult r =
      run_paradyse("run --ranks 2 --model tiny-gpt --layers 1 --seq 32 --steps 1 --ops '" + path + "'");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string text = read_text(path);
  csv::Reader reader(text, path);
  std::vector<std::string> cells;
  REQUIRE(reader.next(cells));
  CHECK(cells == std::vector<std::string>{"seq", "phase", "layer", "label", "op", "seconds"});
  std::set<std::string> phases;
  while (reader.next(cells)) {
    INFO("line " << reader.line());
    REQUIRE(cells.size() == 6);
    CHECK(cells[0] == "32");
    phases.insert(cells[1]);
    CHECK(std::stod(cells[5]) >= 0);
  }
  CHECK(phases.contains("layer_forward"));
  CHECK(phases.contains("layer_backward"));
}

TEST_CASE("run: bad inputs are refused before any rank starts", "[real][cli]") {
  struct Case {
    const char* arguments;
    const char* message;
  };
  for (const Case& c : {
           Case{"--ranks 3 --seq 96", "cannot run tiny-gpt on 3 ranks"},
           Case{"--ranks 3 --seq 96 --plan ulysses_z", "Ulysses degree 3 must divide the 8 attention heads"},
           Case{"--ranks 4 --seq 100", "multiples of 8 (2 x ranks"},
           Case{"--ranks 2 --seq 0", "--seq"},
           Case{"--seq 64 --device cuda", "CPU-only LibTorch"},
           Case{"--seq 64 --gloo-on-device", "--gloo-on-device: expected with --device cuda"},
           Case{"--seq 64 --plan megatron_ts,metp,metp", "expected one strategy, or one per layer"},
           Case{"--seq 64 --ranks 0", "--ranks"},
           Case{"--ranks 2 --docs 32,0,16", "--docs: expected a positive token count"},
           Case{"--ranks 2 --docs 32,16 --seq 64", "expected one of --seq LENGTHS, --docs DOCUMENTS"},
       }) {
    INFO(c.arguments);
    const RunResult r = run_paradyse(std::string("run --model tiny-gpt ") + c.arguments);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::Contains(c.message));
  }
}

}  // namespace paradyse::testing
