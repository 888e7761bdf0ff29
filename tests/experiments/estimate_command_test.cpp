#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/experiments/run_paradyse.hpp"
#include "tests/experiments/run_paradyse_json.hpp"

using namespace paradyse::testing;

TEST_CASE("estimate --json prints the documented keys", "[experiments]") {
  const RunResult r = run_paradyse("estimate --model llama-8l --strategy megatron_ts --seq 8K --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.at("strategy") == "megatron_ts");
  REQUIRE(j.at("seq") == 8192);
  for (const char* key : {"total", "forward", "backward"}) REQUIRE(j.at("time_s").at(key).get<double>() > 0);
  REQUIRE(j.at("time_s").at("total").get<double>() >=
          j.at("time_s").at("forward").get<double>() + j.at("time_s").at("backward").get<double>());
  REQUIRE(j.at("memory_bytes").at("peak").get<double>() > 0);
  REQUIRE(j.at("memory_bytes").at("capacity").get<double>() > 80e9);
  REQUIRE(j.at("fits").is_boolean());
  REQUIRE(j.at("flops").get<double>() > 0);
  REQUIRE(j.at("comm_bytes").get<double>() > 0);
}

TEST_CASE("estimate: several strategies and lengths give a list, output is deterministic", "[experiments]") {
  const std::string args = "estimate --model bert-large --strategy all --seq 4K,32K --json";
  const RunResult first = run_paradyse(args);
  REQUIRE(first.exit_code == 0);
  const auto j = nlohmann::json::parse(first.out);
  REQUIRE(j.is_array());
  REQUIRE(j.size() % 2 == 0);
  REQUIRE(j.size() >= 2);
  REQUIRE(run_paradyse(args).out == first.out);
  const RunResult table = run_paradyse("estimate --model bert-large --strategy all --seq 4K,32K");
  REQUIRE(table.exit_code == 0);
  REQUIRE_THAT(table.out, Catch::Contains("megatron_ts") && Catch::Contains("total_ms"));
}

TEST_CASE("estimate --docs: a packed micro-batch, faster than the same tokens as one sequence",
          "[experiments]") {
  const auto j = run_paradyse_json("estimate --strategy megatron_ts --docs 6000,2000,100 --json");
  CHECK(j.at("seq") == 8100);
  CHECK(j.at("documents") == 3);
  CHECK(j.at("padded_seq") == 6000 + 2000 + 112);  // each document to a multiple of 2p = 16
  const auto one = run_paradyse_json("estimate --strategy megatron_ts --seq 8100 --json");
  CHECK(j.at("time_s").at("total").get<double>() < one.at("time_s").at("total").get<double>());
}

TEST_CASE(
    "estimate --recompute offload: a length that does not fit on the GPU fits with its activations in host "
    "memory",
    "[experiments]") {
  const std::string args = "estimate --model llama-8l --strategy ulysses_z --seq 256K --json --recompute ";
  const auto kept = run_paradyse_json(args + "none");
  const auto offloaded = run_paradyse_json(args + "offload");
  CHECK(kept.at("fits") == false);
  CHECK(offloaded.at("fits") == true);
  CHECK(offloaded.at("plan") == "ulysses_z:offload");
  const auto& memory = offloaded.at("memory_bytes");
  CHECK(kept.at("memory_bytes").at("offloaded") == 0);
  CHECK(memory.at("offloaded").get<double>() > 0);
  CHECK(memory.at("offloaded").get<double>() <= memory.at("host_capacity").get<double>());
  // What waits in host memory is what the GPU no longer holds (beyond the layer whose copies run).
  CHECK(kept.at("memory_bytes").at("peak").get<double>() - memory.at("peak").get<double>() >
        0.5 * memory.at("offloaded").get<double>());
  const RunResult text =
      run_paradyse("estimate --model llama-8l --strategy ulysses_z --seq 256K --recompute offload");
  CHECK_THAT(text.out, Catch::Contains("offloaded to host memory at the peak") &&
                           Catch::Contains("the host gives a GPU"));
}

TEST_CASE("estimate: bad inputs fail with a clear message and no output", "[experiments]") {
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"estimate --model nosuch --seq 4096", "nosuch"},
      {"estimate --cluster nosuch --seq 4096", "dgx-a100"},
      {"estimate --strategy nosuch --seq 4096", "unknown strategy 'nosuch'"},
      {"estimate --seq 0", "--seq: expected a positive token count"},
      {"estimate --seq -4096", "expected a positive token count"},
      {"estimate --seq abc", "got 'abc'"},
      {"estimate --seq 4096,,8192", "got ''"},
      {"estimate --strategy megatron_ts --seq 4096 --degree 5", "must divide the 96 attention heads"},
      {"estimate --strategy megatron_ts --seq 4096 --degree 16", "between 1 and the 8 GPUs"},
      {"estimate --seq 4096 --recompute sometimes", "expected none, selective, full or offload"},
      {"estimate --seq 4096 --recompute offload --cluster dgx-h100", "gpu.host_link_bytes_per_second"},
      {"estimate --seq 4096 --nodes 0", "nodes"},
      {"estimate --model tests/experiments/data/missing_hidden_size.json --seq 4096",
       "missing_hidden_size.json: field 'hidden_size'"},
      {"estimate --model tests/experiments/data/malformed.json --seq 4096", "malformed.json:3"},
      {"estimate", "expected one of --seq LENGTHS, --docs DOCUMENTS"},
      {"estimate --seq 4096 --docs 2048,2048", "expected one of --seq LENGTHS, --docs DOCUMENTS"},
      {"estimate --docs 2048,0", "--docs: expected a positive token count"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const RunResult r = run_paradyse(c.args);
    REQUIRE(r.exit_code != 0);
    REQUIRE_THAT(r.err, Catch::Contains(c.message));
    REQUIRE(r.out.empty());
  }
}

TEST_CASE("every subcommand explains itself with --help", "[experiments]") {
  for (const char* command :
       {"", "compare", "ablation", "trace", "trace stats", "trace list", "trace convert", "estimate",
        "simulate", "plan", "costmodel", "costmodel profile", "costmodel fit", "costmodel eval", "bench",
        "bench-simulate", "bench-plan", "bench-groups", "export"}) {
    const RunResult r = run_paradyse(std::string(command) + " --help");
    INFO(command);
    REQUIRE(r.exit_code == 0);
    REQUIRE_THAT(r.out, Catch::Contains("Usage") || Catch::Contains("usage"));
  }
}

TEST_CASE("estimate --framework: the host that issues a short step's calls sets its time", "[experiments]") {
  // BERT-large, 1K tokens over 8 GPUs: 128 tokens of a 1024-wide model per GPU, kernels of a few
  // microseconds, where eager PyTorch's issue costs bound the step.
  const std::string args = "estimate --model bert-large --strategy megatron_ts --seq 1K --json";
  const auto time_s = [&](const std::string& framework) {
    const RunResult r = run_paradyse(args + framework);
    REQUIRE(r.exit_code == 0);
    const auto time = nlohmann::json::parse(r.out).at("time_s");
    // The step's time is the compute stream's: busy, waiting for communication, or for the host.
    CHECK(time.at("total").get<double>() ==
          Approx(time.at("compute").get<double>() + time.at("exposed_communication").get<double>() +
                 time.at("host_bound").get<double>())
              .epsilon(1e-9));
    return time;
  };
  const auto total_s = [&](const std::string& framework) {
    return time_s(framework).at("total").get<double>();
  };
  const double cluster_default = total_s("");
  CHECK(total_s(" --framework eager-pytorch-nominal") == cluster_default);  // dgx-a100's own
  const double ideal = total_s(" --framework no-host-cost");
  const double h100_host = total_s(" --framework eager-pytorch-h100-host");
  CHECK(ideal < cluster_default);
  CHECK(h100_host > cluster_default);  // a layer's calls cost 20-120 µs there against 10 µs nominal
  CHECK(time_s(" --framework no-host-cost").at("host_bound").get<double>() == 0);
  CHECK(time_s(" --framework eager-pytorch-h100-host").at("host_bound").get<double>() > 0.5 * h100_host);
  // The table names the framework in its first line and gives the host's share in its last column.
  const RunResult table =
      run_paradyse("estimate --strategy megatron_ts --seq 1K,64K --framework no-host-cost");
  CHECK_THAT(table.out, Catch::Contains("framework no-host-cost") && Catch::Contains("host_%"));
}

TEST_CASE(
    "estimate --attention-implementation: a slower fused attention kernel, where the GPU has its figures",
    "[experiments]") {
  // 64K tokens over 8 GPUs: attention is most of the step, so the Triton kernel (about half
  // FlashAttention-2's speed on the A100) lengthens it.
  const std::string args = "estimate --model gpt-8l --strategy ulysses_z --seq 64K";
  const auto total_s = [&](const std::string& extra) {
    const RunResult r = run_paradyse(args + " --json" + extra);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out).at("time_s").at("total").get<double>();
  };
  const double flash_attention_2 = total_s("");
  const double triton = total_s(" --attention-implementation flash-attention-triton");
  CHECK(triton > 1.3 * flash_attention_2);
  CHECK(triton < 2.6 * flash_attention_2);  // no more than the kernel's own ratio (203/95 to 189/80)
  CHECK_THAT(run_paradyse(args + " --attention-implementation flash-attention-triton").out,
             Catch::Contains("attention flash-attention-triton"));

  const RunResult unknown = run_paradyse(args + " --attention-implementation flash-attention-3");
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.out.empty());
  CHECK_THAT(unknown.err, Catch::Contains("--attention-implementation") &&
                              Catch::Contains("flash-attention-triton") &&
                              Catch::Contains("flash-attention-3"));
  const RunResult h200 =
      run_paradyse(args + " --cluster dgx-h200 --attention-implementation flash-attention-triton");
  CHECK(h200.exit_code == 2);
  CHECK_THAT(h200.err, Catch::Contains("none besides its own curves"));
}
