#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <set>

#include "strategies/library.hpp"
#include "strategies/model.hpp"
#include "strategies/sequence_layout.hpp"
#include "strategies/training_step.hpp"
#include "tests/experiments/run_paradyse.hpp"
#include "tests/experiments/run_paradyse_json.hpp"

using namespace paradyse;
using namespace paradyse::testing;

TEST_CASE("simulate --json prints the documented keys", "[experiments]") {
  const RunResult r = run_paradyse("simulate --model llama-8l --plan ulysses_z --seq 8K --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("plan") == "ulysses_z");
  CHECK(j.at("seq") == 8192);
  CHECK(j.at("iteration_time_s").get<double>() > 0);
  CHECK(j.at("peak_memory_bytes").get<double>() > 0);
  CHECK(j.at("oom") == false);
  CHECK(j.at("events").get<int64_t>() > 0);
  CHECK(j.at("events").get<int64_t>() == j.at("kernels").get<int64_t>() + j.at("flows").get<int64_t>() +
                                             j.at("analytic_collectives").get<int64_t>());
  REQUIRE(j.at("per_rank").size() == 8);
  double peak = 0;
  for (const auto& rank : j.at("per_rank")) {
    for (const char* key : {"compute_s", "exposed_comm_s", "host_bound_s", "idle_s"})
      CHECK(rank.at(key).get<double>() >= 0);
    CHECK(rank.at("compute_s").get<double>() + rank.at("exposed_comm_s").get<double>() +
              rank.at("host_bound_s").get<double>() + rank.at("idle_s").get<double>() ==
          Approx(j.at("iteration_time_s").get<double>()));
    peak = std::max(peak, rank.at("peak_memory_bytes").get<double>());
  }
  CHECK(peak == j.at("peak_memory_bytes").get<double>());
}

TEST_CASE("simulate --docs: a packed micro-batch, as the estimate prices and sizes it", "[experiments]") {
  const std::string micro_batch = " --model llama-8l --docs 6000,2000,100 --json";
  const auto s = run_paradyse_json("simulate --plan ulysses_z" + micro_batch);
  CHECK(s.at("seq") == 8100);
  CHECK(s.at("documents") == 3);
  const auto e = run_paradyse_json("estimate --strategy ulysses_z" + micro_batch);
  CHECK(s.at("padded_seq") == e.at("padded_seq"));
  CHECK(s.at("peak_memory_bytes").get<double>() == e.at("memory_bytes").at("peak").get<double>());
  CHECK(s.at("iteration_time_s").get<double>() ==
        Approx(e.at("time_s").at("total").get<double>()).epsilon(0.05));
}

TEST_CASE("simulate: a per-layer plan, an out-of-memory plan, the table", "[experiments]") {
  const RunResult mixed = run_paradyse(
      "simulate --plan megatron_ts,metp,megatron_ts,metp,ulysses_z,ulysses_z,megatron_cz,colossal_z --seq 4K "
      "--json");
  REQUIRE(mixed.exit_code == 0);
  CHECK(nlohmann::json::parse(mixed.out).at("plan") ==
        "megatron_ts,metp,megatron_ts,metp,ulysses_z,ulysses_z,megatron_cz,colossal_z");

  const RunResult oom = run_paradyse("simulate --plan colossal_z --seq 64K --json");
  REQUIRE(oom.exit_code == 0);  // out of memory is a result
  const auto j = nlohmann::json::parse(oom.out);
  CHECK(j.at("oom") == true);
  CHECK(j.at("oom_at").at("layer") == 0);
  CHECK(j.at("oom_at").at("bytes").get<double>() > j.at("oom_at").at("capacity_bytes").get<double>());

  const RunResult table = run_paradyse("simulate --plan colossal_z --seq 64K");
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.out,
             Catch::Contains("OUT OF MEMORY") && Catch::Contains("first out of memory at  rank 0, layer 0"));
  CHECK_THAT(table.out, Catch::Contains("exposed_comm_ms") && Catch::Contains("iteration time"));
}

TEST_CASE("simulate --timeline writes trace-event JSON with every op of every rank once", "[experiments]") {
  const auto dir = temp_dir();
  const std::string path = (dir / "timeline.json").string();
  const RunResult r =
      run_paradyse("simulate --model bert-large --plan megatron_cz --seq 2K --timeline " + path);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(read_text(path));
  std::map<int, std::set<int64_t>> ops_seen;
  int64_t op_events = 0;
  for (const auto& event : j.at("traceEvents")) {
    if (event.at("ph") != "X") continue;
    ++op_events;
    CHECK(event.at("dur").get<double>() >= 0);
    CHECK(event.at("ts").get<double>() >= 0);
    const auto tid = event.at("tid").get<int>();
    CHECK((tid == 0 || tid == 1));
    CHECK(ops_seen[event.at("pid").get<int>()].insert(event.at("args").at("op").get<int64_t>()).second);
  }
  // The programs the simulator ran, traced independently here.
  const ModelSpec model = load_model("bert-large");
  StepSpec spec;
  spec.model = &model;
  spec.tokens = SequenceLayout::padded_length(2048, 8, model.causal);
  spec.plan = uniform_plan(megatron_cz(), model.num_layers);
  REQUIRE(ops_seen.size() == 8);
  int64_t total = 0;
  for (int rank = 0; rank < 8; ++rank) {
    const Program program = trace_training_step(spec, rank, 8);
    CHECK(ops_seen[rank].size() == program.ops.size());
    CHECK(*ops_seen[rank].rbegin() == static_cast<int64_t>(program.ops.size()) - 1);
    total += static_cast<int64_t>(program.ops.size());
  }
  CHECK(op_events == total);

  // Same inputs, same bytes.
  const std::string again = (dir / "again.json").string();
  REQUIRE(run_paradyse("simulate --model bert-large --plan megatron_cz --seq 2K --timeline " + again).out ==
          r.out);
  CHECK(read_text(again) == read_text(path));
  std::filesystem::remove_all(dir);
}

TEST_CASE("simulate --max-flows-per-collective 0: no flows, every collective at its routed time",
          "[experiments]") {
  // On one node nothing contends with a ring but itself: the flows and the routed time agree.
  const std::string args = "simulate --model llama-8l --plan megatron_ts --seq 16K --json";
  const RunResult flows = run_paradyse(args), routed = run_paradyse(args + " --max-flows-per-collective 0");
  INFO(flows.err << routed.err);
  REQUIRE(flows.exit_code == 0);
  REQUIRE(routed.exit_code == 0);
  const auto with_flows = nlohmann::json::parse(flows.out), analytic = nlohmann::json::parse(routed.out);
  CHECK(with_flows.at("flows").get<int64_t>() > 0);
  CHECK(with_flows.at("analytic_collectives") == 0);
  CHECK(analytic.at("flows") == 0);
  CHECK(analytic.at("analytic_collectives").get<int64_t>() > 0);
  CHECK(analytic.at("kernels") == with_flows.at("kernels"));
  CHECK_THAT(analytic.at("collective_algorithm").get<std::string>(),
             Catch::Contains("no flows are simulated"));
  CHECK(analytic.at("iteration_time_s").get<double>() ==
        Approx(with_flows.at("iteration_time_s").get<double>()).epsilon(0.01));
}

TEST_CASE("simulate: bad inputs fail with a clear message and no output", "[experiments]") {
  const auto dir = temp_dir();
  const std::string timeline = (dir / "t.json").string();
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"simulate --plan megatron_ts,metp --seq 4K",
       "expected one strategy, or one per layer of gpt-8l (8), got 2"},
      {"simulate --plan nosuch --seq 4K", "unknown strategy 'nosuch'"},
      {"simulate --plan "
       "megatron_ts,megatron_ts,megatron_ts,nosuch,megatron_ts,megatron_ts,megatron_ts,megatron_ts "
       "--seq 4K",
       "unknown strategy 'nosuch'"},
      {"simulate --plan megatron_ts --seq 4K --cluster tests/experiments/data/zero_gpus.json",
       "zero_gpus.json: field 'gpus_per_node'"},
      {"simulate --plan megatron_ts --seq 4K --degree 16", "between 1 and the 8 GPUs"},
      {"simulate --plan ulysses_z --seq 64K --recompute offload --cluster dgx-h100",
       "field 'gpu.host_link_bytes_per_second': expected the GPU's host link bandwidth"},
      {"simulate --plan megatron_ts --seq 4K,8K", "expected one sequence length"},
      {"simulate --plan megatron_ts --seq 0", "expected a positive token count"},
      {"simulate --plan megatron_ts --seq 4K --degree 5", "must divide the 96 attention heads"},
      {"simulate --plan megatron_ts --seq 4K --oversubscription 0.5", "oversubscription of at least 1"},
      {"simulate --plan megatron_ts --seq 4K --max-flows-per-collective -1", "--max-flows-per-collective"},
      {"simulate --plan megatron_ts --seq 4K --timeline " + dir.string(), "it is a folder"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const bool names_timeline = c.args.find("--timeline") != std::string::npos;
    const RunResult r = run_paradyse(names_timeline ? c.args : c.args + " --timeline " + timeline);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK(r.out.empty());
    CHECK(!std::filesystem::exists(timeline));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("simulate: two processes print the same JSON and write the same timeline, byte for byte",
          "[experiments]") {
  // The in-process repeat (tests/sim/agreement_test.cpp) shares one heap and one address layout;
  // separate processes do not (ASLR), so output that hangs on a pointer's order, an uninitialised
  // value or a clock differs here. A plan with every strategy: flows that contend for NVLink, ring and
  // all-to-all schedules, and the full-precision numbers of --json.
  const auto dir = temp_dir();
  const std::string args =
      "simulate --model llama-8l --seq 4K --json "
      "--plan megatron_ts,metp,ulysses_z,megatron_cz,colossal_z,megatron_cz,ulysses_z,metp --timeline ";
  const RunResult first = run_paradyse(args + (dir / "first.json").string());
  const RunResult second = run_paradyse(args + (dir / "second.json").string());
  INFO(first.err << second.err);
  REQUIRE(first.exit_code == 0);
  REQUIRE(second.exit_code == 0);
  const auto j = nlohmann::json::parse(first.out);
  CHECK(j.at("per_rank").size() == 8);
  CHECK(j.at("flows").get<int64_t>() > 0);
  CHECK(second.out == first.out);
  const std::string timeline = read_text(dir / "first.json");
  CHECK(nlohmann::json::parse(timeline).at("traceEvents").size() > 0);
  CHECK(read_text(dir / "second.json") == timeline);
  std::filesystem::remove_all(dir);
}

TEST_CASE("simulate names the framework that issues the calls, and --framework changes a short step",
          "[experiments]") {
  const std::string args = "simulate --model bert-large --plan megatron_ts --seq 1K";
  const RunResult own = run_paradyse(args);
  REQUIRE(own.exit_code == 0);
  CHECK_THAT(own.out, Catch::Contains("framework eager-pytorch-nominal)"));  // dgx-a100's own
  const RunResult ideal = run_paradyse(args + " --framework no-host-cost --json");
  const RunResult measured = run_paradyse(args + " --framework eager-pytorch-h100-host --json");
  REQUIRE(ideal.exit_code == 0);
  REQUIRE(measured.exit_code == 0);
  // A host that issues each call in tens of microseconds makes this host-bound step slower.
  CHECK(nlohmann::json::parse(measured.out).at("iteration_time_s").get<double>() >
        1.5 * nlohmann::json::parse(ideal.out).at("iteration_time_s").get<double>());
}
