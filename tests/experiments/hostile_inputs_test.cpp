// Inputs a hostile or careless user gives, each of which once crashed a command, grew without bound,
// or read "out of memory" where nothing could run. Every one must now be refused by name with exit
// status 2, at once, leaving nothing behind; one test per kind of input.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/experiments/run_paradyse.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse::testing;
namespace fs = std::filesystem;
using Catch::Contains;

namespace {

void check_hostile_refused(const RunResult& r, const std::string& message) {
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("paradyse: error: ") && Contains(message));
}

std::string repeated(const std::string& piece, int times) {
  std::string text;
  for (int i = 0; i < times; ++i) text += piece;
  return text;
}

// A preset's text with one edit: `from` replaced by `to` (which must be there).
std::string edited_file(const std::string& file, const std::string& from, const std::string& to) {
  std::string text = read_text(file);
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("hostile inputs: a degree no strategy of a policy runs at is an error that says what runs",
          "[experiments][hostile]") {
  TempDir dir;
  // 72 GPUs: no strategy splits gpt-8l's 96 heads over 72 ranks.
  const RunResult nvl72 = run_paradyse("plan --cluster gb200-nvl72 --seq 32K");
  check_hostile_refused(nvl72, "at degree 72");
  CHECK_THAT(nvl72.err, Contains("96 attention heads") && Contains("They run at degrees 1, 2, 3, 4, 6, 8"));
  // 16 GPUs: llama3-8b's 8 key/value heads stop every 1-D strategy; the 2-D ones run.
  const RunResult llama = run_paradyse(
      "compare --model llama3-8b --nodes 2 --engine analytic --limit 100 --out " + dir.file("c"));
  check_hostile_refused(llama, "8 key/value heads");
  CHECK_THAT(llama.err, Contains("usp_u2") && Contains("--policy all-2d"));
  CHECK_FALSE(fs::exists(dir.file("c")));
  // 28 heads on 8 GPUs (Qwen2-7B's shape).
  std::string qwen = read_text("strategies/models/llama3-8b.json");
  for (const auto& [from, to] : {std::pair{"\"num_attention_heads\": 32", "\"num_attention_heads\": 28"},
                                 {"\"num_key_value_heads\": 8", "\"num_key_value_heads\": 4"},
                                 {"\"hidden_size\": 4096", "\"hidden_size\": 3584"}}) {
    REQUIRE(qwen.find(from) != std::string::npos);
    qwen.replace(qwen.find(from), std::string(from).size(), to);
  }
  check_hostile_refused(
      run_paradyse("plan --model " + dir.write("qwen2-7b.json", qwen) + " --cluster dgx-h100 --seq 4K"),
      "28 attention heads");
}

TEST_CASE("hostile inputs: JSON nested past 64 levels is refused at once, in every reader",
          "[experiments][hostile]") {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  const std::string arrays = dir.write("deep.json", repeated("[", 100000) + repeated("]", 100000));
  check_hostile_refused(run_paradyse("estimate --seq 4K --model " + arrays),
                        arrays + ": expected objects and arrays nested at most 64 deep");
  const std::string line =
      dir.write("deep.jsonl", "{\"length\": " + repeated("[", 200000) + repeated("]", 200000) + "}\n");
  check_hostile_refused(run_paradyse("trace stats " + line), line + ":1:");
  // Keys at every level: the memory of such a parse grew with the square of the depth.
  const std::string objects =
      dir.write("objects.json", repeated("{\"a\":", 100000) + "1" + repeated("}", 100000));
  check_hostile_refused(run_paradyse("estimate --seq 4K --cluster " + objects), "nested at most 64 deep");
  CHECK(seconds_since(start) < 10);
}

TEST_CASE("hostile inputs: a file without end is refused within its bound", "[experiments][hostile]") {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  check_hostile_refused(run_paradyse("trace stats /dev/zero"),
                        "/dev/zero:1: expected lines of at most 16 MiB");
  check_hostile_refused(run_paradyse("sweep --spec /dev/zero --out " + dir.file("s")),
                        "/dev/zero: expected a JSON file of at most 64 MiB");
  CHECK_FALSE(fs::exists(dir.file("s")));
  CHECK(seconds_since(start) < 20);
}

TEST_CASE("hostile inputs: cluster figures outside any machine's range are refused at load",
          "[experiments][hostile]") {
  TempDir dir;
  const std::string preset = "hw_models/presets/dgx-a100.json";
  const std::string peak = "\"bf16_flops_per_second\": 312e12";
  REQUIRE_THAT(read_text(preset), Contains(peak));
  const std::string tiny =
      dir.write("tiny.json", edited_file(preset, peak, "\"bf16_flops_per_second\": 1e-300"));
  const std::string typo =
      dir.write("typo.json", edited_file(preset, peak, "\"bf16_flops_per_second\": 312"));
  for (const std::string command :
       {"estimate --seq 4K", "plan --seq 4K", "simulate --plan megatron_ts --seq 4K"})
    check_hostile_refused(run_paradyse(command + " --cluster " + tiny),
                          tiny + ": field 'gpu.bf16_flops_per_second': expected 1e+09 to 1e+17 FLOP/s");
  check_hostile_refused(run_paradyse("estimate --seq 4K --cluster " + typo), "a figure in TFLOP/s?");
}

TEST_CASE("hostile inputs: a number flag or sweep value must be finite", "[experiments][hostile]") {
  TempDir dir;
  check_hostile_refused(run_paradyse("simulate --plan megatron_ts --seq 4K --oversubscription inf"),
                        "--oversubscription: expected a finite number, got 'inf'");
  check_hostile_refused(run_paradyse("bench-groups --milp-time-limit nan"),
                        "--milp-time-limit: expected a finite number");
  check_hostile_refused(run_paradyse("plan --seq 4K --gamma nan"), "--gamma: expected a finite number");
  const std::string spec = dir.write("inf.toml", "[axes]\nnvlink_scale = [inf]\n");
  check_hostile_refused(run_paradyse("sweep --spec " + spec + " --out " + dir.file("s")),
                        "axes.nvlink_scale[0]': expected a positive finite number");
  CHECK_FALSE(fs::exists(dir.file("s")));
}

TEST_CASE("hostile inputs: every sweep point is checked before any runs, and nothing is left",
          "[experiments][hostile]") {
  TempDir dir;
  const std::string out = dir.file("s");
  const auto spec_with = [&](const std::string& name, const std::string& base) {
    return dir.write(name, "[base]\nengine = \"analytic\"\nlimit = 20\npolicies = \"static:megatron_ts\"\n" +
                               base + "\n[axes]\nnvlink_scale = [1.0, 2.0]\n");
  };
  for (const auto& [base, says] : {std::pair<std::string, std::string>{"sample = 2.0", "--sample"},
                                   {"grid_ratio = 0.5", "--grid-ratio"},
                                   {"global_batch_tokens = \"1K\"", "--micro-batch-tokens"},
                                   {"model = \"llama3-8b\"\nnodes = 2", "8 key/value heads"}}) {
    INFO(base);
    const RunResult r = run_paradyse("sweep --spec " + spec_with("bad.toml", base) + " --out " + out);
    check_hostile_refused(r, says);
    CHECK_THAT(r.err, Contains("point 'nvlink_scale=1.0'"));
    CHECK_FALSE(fs::exists(out));
  }
  // The fixed spec then runs into the same folder.
  const RunResult fixed =
      run_paradyse("sweep --spec " + spec_with("good.toml", "sample = 1.0") + " --out " + out);
  INFO(fixed.err);
  CHECK(fixed.exit_code == 0);
  CHECK(fs::exists(out + "/sweep.csv"));
  // Points that run but train nothing (gpt-8l's weights alone fill three A100s) are a result: the plot
  // of the longest sequence trained says there is no point to draw.
  const RunResult nothing =
      run_paradyse("sweep --spec " + spec_with("three.toml", "degree = 3") + " --out " + dir.file("three"));
  INFO(nothing.err);
  CHECK(nothing.exit_code == 0);
  CHECK_THAT(nothing.out, !Contains("0.00x"));  // no speedup over a static that trains nothing
  CHECK(fs::file_size(dir.file("three") + "/longest.png") > 0);
  CHECK_FALSE(fs::exists(dir.file("three") + "/plot-data"));
}

TEST_CASE("hostile inputs: --max-seq is a length like every other", "[experiments][hostile]") {
  for (const std::string value : {"1073741825", "4294967296", "9223372036854775807", "99999999999999999999"})
    check_hostile_refused(run_paradyse("plan --longest --max-seq " + value), "--max-seq");
  const RunResult k = run_paradyse("plan --longest --max-seq 64K --json");
  INFO(k.err);
  CHECK(k.exit_code == 0);
}

TEST_CASE("hostile inputs: an output name longer than the file system allows names its flag",
          "[experiments][hostile]") {
  TempDir dir;
  const std::string name = dir.file(std::string(300, 'x'));
  check_hostile_refused(run_paradyse("compare --engine analytic --limit 10 --out " + name),
                        "--out: expected the path of a folder to write");
}

TEST_CASE("hostile inputs: run refuses a step too large or too many steps before any rank starts",
          "[experiments][hostile]") {
  const auto start = std::chrono::steady_clock::now();
  // 16M tokens of tiny-gpt need more than this machine has: refused before any rank starts.
  check_hostile_refused(run_paradyse("run --seq 16M --steps 1"), "memory");
  check_hostile_refused(run_paradyse("run --seq 256 --steps 2147483647"),
                        "--steps: expected a positive whole number up to 1000000");
  check_hostile_refused(run_paradyse("run --seq 256 --warmup 2147483647"), "--warmup");
  CHECK(seconds_since(start) < 10);
}

TEST_CASE("hostile inputs: a profile's values and strategies are checked where they are read",
          "[experiments][hostile]") {
  TempDir dir;
  const std::string header =
      "model,cluster,degree,batch,source,strategy,recompute,seq,iteration_time_s,peak_memory_bytes,"
      "saved_bytes_per_layer\n";
  std::string huge = header, unknown = header;
  for (int s = 1; s <= 6; ++s) {
    huge += "gpt-8l,dgx-a100,8,1,sim,megatron_ts,none," + std::to_string(s * 1024) + ",1e308,1e9,1e6\n";
    unknown += "gpt-8l,dgx-a100,8,1,sim,foo,none," + std::to_string(s * 1024) + ",0.1,1e9,1e6\n";
  }
  const std::string huge_file = dir.write("huge.csv", huge), unknown_file = dir.write("unknown.csv", unknown);
  check_hostile_refused(run_paradyse("costmodel fit --profile " + huge_file + " --out " + dir.file("m.json")),
                        huge_file + ":2: field 'iteration_time_s'");
  check_hostile_refused(
      run_paradyse("costmodel fit --profile " + unknown_file + " --out " + dir.file("m.json")),
      unknown_file + ":2: field 'strategy': unknown strategy 'foo'");
  CHECK_FALSE(fs::exists(dir.file("m.json")));
}

TEST_CASE("hostile inputs: a run of more sequences than a compare holds is refused before the work",
          "[experiments][hostile]") {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  const RunResult split =
      run_paradyse("compare --engine analytic --max-len 1 --over split --out " + dir.file("c"));
  check_hostile_refused(split, "expected a run of at most 268435456 sequences");
  CHECK_FALSE(fs::exists(dir.file("c")));
  CHECK(seconds_since(start) < 10);
}

TEST_CASE("hostile inputs: a published table's run that cannot be priced names the file and the run",
          "[experiments][hostile]") {
  TempDir dir;
  const auto table = [&](const std::string& cluster, int degree) {
    return dir.write("table.json", R"({"source": "s", "runs": [{"name": "x", "table": "t", "cluster": ")" +
                                       cluster +
                                       R"(", "model": "gpt-8l", "strategy": "megatron_ts", "degree": )" +
                                       std::to_string(degree) +
                                       R"(, "seq": 4096, "measure": "iteration", "measured_s": 1.0}]})");
  };
  check_hostile_refused(run_paradyse("published --table " + table("nowhere", 8)),
                        "table.json: field 'runs[0].cluster'");
  check_hostile_refused(run_paradyse("published --table " + table("dgx-a100", 64)),
                        "table.json: field 'runs[0].degree'");
}

TEST_CASE("hostile inputs: an ablation whose profile cannot be fitted fails before profiling",
          "[experiments][hostile]") {
  TempDir dir;
  check_hostile_refused(
      run_paradyse("ablation --profile-seq 1K,2K --limit 10 --engine analytic --out " + dir.file("ab")),
      "--profile-seq: expected at least 5 distinct lengths");
  CHECK_FALSE(fs::exists(dir.file("ab")));
}

TEST_CASE("hostile inputs: an interrupted compare ends as interrupted programs do, leaving nothing",
          "[experiments][hostile]") {
  TempDir dir;
  // The simulated compare of the main trace takes half a minute; the interrupt comes after 2 s.
  const RunResult r = run_program(
      "timeout", "--preserve-status -s INT 2 " + paradyse_path() + " compare --out " + dir.file("c"));
  INFO(r.err);
  CHECK(r.exit_code == 130);
  CHECK_THAT(r.err, !Contains("CTRL-C"));
  CHECK_FALSE(fs::exists(dir.file("c")));
}

TEST_CASE("hostile inputs: a config that turns on attention paradyse does not model is refused",
          "[experiments][hostile]") {
  TempDir dir;
  const std::string mistral =
      dir.write("mistral.json", edited_file("strategies/models/llama3-8b.json", "\"model_type\": \"llama\"",
                                            "\"model_type\": \"mistral\", \"sliding_window\": 4096"));
  check_hostile_refused(run_paradyse("estimate --seq 64K --model " + mistral),
                        "field 'sliding_window': sliding-window attention is not modelled");
  const std::string full =
      dir.write("full.json", edited_file("strategies/models/llama3-8b.json", "\"model_type\": \"llama\"",
                                         "\"model_type\": \"mistral\", \"sliding_window\": null"));
  CHECK(run_paradyse("estimate --seq 4K --strategy megatron_ts --model " + full).exit_code == 0);
}

TEST_CASE("hostile inputs: integers past their type are refused as given", "[experiments][hostile]") {
  TempDir dir;
  const std::string spec = dir.write("n.toml", "[axes]\nnodes = [9223372036854775807]\n");
  check_hostile_refused(
      run_paradyse("sweep --spec " + spec + " --out " + dir.file("s")),
      "axes.nodes[0]': expected a positive integer up to 2147483647, got 9223372036854775807");
  check_hostile_refused(run_paradyse("plan --seq 4K --nodes 2147483648"),
                        "--nodes: expected a positive whole number up to 2147483647, got '2147483648'");
  check_hostile_refused(run_paradyse("compare --seed -1 --out " + dir.file("c")),
                        "--seed: expected a non-negative whole number, got '-1'");
}

TEST_CASE("hostile inputs: a degree past the cluster is the same error whatever it is",
          "[experiments][hostile]") {
  for (const std::string degree : {"16", "1000"})
    check_hostile_refused(run_paradyse("estimate --seq 4K --degree " + degree),
                          "--degree: expected a degree between 1 and the 8 GPUs of dgx-a100, got " + degree);
  check_hostile_refused(run_paradyse("estimate --seq 4K --degree 5"), "at degree 5");
}

TEST_CASE("hostile inputs: control and binary bytes from a file are escaped in messages",
          "[experiments][hostile]") {
  TempDir dir;
  const std::string trace = dir.write("bad.txt", std::string("1\n\x1b[31mred\0\xff\n", 14));
  const RunResult r = run_paradyse("trace stats " + trace);
  check_hostile_refused(r, "bad.txt:2");
  CHECK_THAT(r.err, Contains("\\x1B[31mred\\x00"));
  CHECK(r.err.find('\x1b') == std::string::npos);
  CHECK(r.err.find('\0') == std::string::npos);
}

TEST_CASE("hostile inputs: subcommands and flags are checked alike", "[experiments][hostile]") {
  TempDir dir;
  check_hostile_refused(
      run_paradyse("trace frob"),
      "expected a subcommand of 'paradyse trace' (list, stats, convert, resample), got 'frob'");
  check_hostile_refused(run_paradyse("estimate --seq 4K --strategy megatron_ts,megatron_ts"),
                        "--strategy: expected each strategy once, got 'megatron_ts' twice");
  check_hostile_refused(run_paradyse("compare --over split --out " + dir.file("c")),
                        "--over requires --max-len");
  const std::string trace = dir.write("t.txt", "100\n");
  check_hostile_refused(run_paradyse("trace stats " + trace + " --column n"),
                        "--column: expected only with a .csv trace");
  check_hostile_refused(run_paradyse("trace stats " + trace + " --field n"),
                        "--field: expected only with a .jsonl trace");
  for (const std::string layers : {"0", "-1"})
    check_hostile_refused(
        run_paradyse("run --seq 256 --layers " + layers),
        "--layers: expected a positive whole number up to 2147483647, got '" + layers + "'");
}
