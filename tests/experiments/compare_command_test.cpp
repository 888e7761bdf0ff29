// paradyse compare end to end: files written and consistent, out of memory ends a curve where it
// should, optimal against the static policies on the bundled traces, bad inputs.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>

#include "common/csv.hpp"
#include "tests/experiments/run_paradyse.hpp"

using namespace paradyse::testing;

namespace {

struct Row {
  std::string policy;
  int64_t index = 0, seq = 0;
  double time_s = 0;
  bool fits = false;
};

// per_sequence.csv:
// policy,index,step,documents,seq,padded_seq,plan,layer_switches,predicted_time_s,time_s,
// predicted_peak_bytes,peak_bytes,fits,lower_bound_s,imbalance,solve_s
std::vector<Row> read_rows(const std::filesystem::path& path) {
  const std::string text = read_text(path);
  paradyse::csv::Reader reader(text, path.string());
  std::vector<std::string> cells;
  REQUIRE(reader.next(cells));
  REQUIRE(cells.size() == 16);
  REQUIRE(cells[6] == "plan");
  std::vector<Row> rows;
  while (reader.next(cells)) {
    REQUIRE(cells.size() == 16);
    rows.push_back(
        {cells[0], std::stoll(cells[1]), std::stoll(cells[4]), std::stod(cells[9]), cells[12] == "1"});
  }
  return rows;
}

bool is_png(const std::filesystem::path& path) {
  return read_text(path).rfind("\x89PNG", 0) == 0;
}

}  // namespace

TEST_CASE("compare writes the summary, table, report and plots, and the totals add up", "[experiments]") {
  const auto dir = temp_dir();
  const auto out = dir / "run";
  const RunResult r = run_paradyse(
      "compare --trace github-code-like --order sorted --sample 0.004 --seed 3 --out " + out.string());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("optimal") && Catch::Contains("interpolation error"));
  for (const char* file :
       {"summary.json", "per_sequence.csv", "report.md", "cumulative_time.png", "time_by_length.png"})
    CHECK(std::filesystem::exists(out / file));
  CHECK(is_png(out / "cumulative_time.png"));
  CHECK(is_png(out / "time_by_length.png"));
  CHECK(!std::filesystem::exists(dir / "run.partial"));
  CHECK_THAT(read_text(out / "report.md"), Catch::Contains("](cumulative_time.png)"));

  const auto summary = nlohmann::json::parse(read_text(out / "summary.json"));
  CHECK(summary.at("engine") == "sim");
  const std::vector<Row> rows = read_rows(out / "per_sequence.csv");
  std::map<std::string, double> total;
  std::map<std::string, int64_t> trained, oom;
  for (const Row& row : rows) {
    total[row.policy] += row.time_s;
    (row.fits ? trained : oom)[row.policy] += 1;
  }
  REQUIRE(summary.at("policies").size() == 7);  // five static strategies, paradyse, optimal
  for (const auto& [policy, values] : summary.at("policies").items()) {
    CAPTURE(policy);
    CHECK(values.at("total_time_s").get<double>() == Approx(total[policy]).epsilon(1e-9));
    CHECK(values.at("trained") == trained[policy]);
    CHECK(values.at("oom_count") == oom[policy]);
    CHECK(values.at("sequences") == trained[policy] + oom[policy]);
    if (total[policy] > 0) CHECK(values.at("tokens_per_s").get<double>() > 0);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("compare: out of memory ends a policy's curve at the right sequence", "[experiments]") {
  const auto dir = temp_dir();
  // gpt-8l on dgx-a100: megatron_ts fits up to 110,880 tokens (plan --longest), metp far beyond.
  const RunResult r = run_paradyse(
      "compare --trace tests/experiments/data/oom_trace.txt --engine analytic --policy "
      "static:megatron_ts,static:metp "
      "--json --out " +
      (dir / "run").string());
  REQUIRE(r.exit_code == 0);
  const auto summary = nlohmann::json::parse(r.out);
  CHECK_THAT(summary.at("preparation").get<std::string>(), Catch::Contains("1 empty"));
  const auto& ts = summary.at("policies").at("static:megatron_ts");
  CHECK(ts.at("oom_count") == 1);               // 120,000 tokens
  CHECK(ts.at("max_len_before_oom") == 50000);  // the longest before it
  CHECK(ts.at("trained") == 5);                 // the shorter ones after it still train
  const auto& metp = summary.at("policies").at("static:metp");
  CHECK(metp.at("oom_count") == 0);
  CHECK(metp.at("max_len_before_oom") == 120000);
  const std::vector<Row> rows = read_rows(dir / "run" / "per_sequence.csv");
  for (const Row& row : rows)
    if (row.policy == "static:megatron_ts") CHECK(row.fits == (row.seq != 120000));
  std::filesystem::remove_all(dir);
}

TEST_CASE("compare: when no policy trains the first sequence, the report and plots are still written",
          "[experiments]") {
  const auto dir = temp_dir();
  std::ofstream(dir / "trace.txt") << "16777216\n100\n";  // 16M tokens fit no plan on one node
  const std::string out = (dir / "run").string();
  const RunResult r =
      run_paradyse("compare --engine analytic --trace " + (dir / "trace.txt").string() + " --out " + out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (const char* file :
       {"summary.json", "per_sequence.csv", "report.md", "cumulative_time.png", "time_by_length.png"})
    CHECK(std::filesystem::exists(dir / "run" / file));
  CHECK_FALSE(std::filesystem::exists(out + ".partial"));
  const auto summary = nlohmann::json::parse(read_text(dir / "run" / "summary.json"));
  for (const auto& [policy, figures] : summary.at("policies").items()) {
    INFO(policy);
    CHECK(figures.at("oom_count") >= 1);
    CHECK(figures.at("max_len_before_oom") == 0);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("compare: optimal is never slower than a static policy on the sequences it trains",
          "[experiments]") {
  for (const char* model : {"gpt-8l", "bert-large"}) {
    for (const char* trace : {"github-code-like", "repo-level-code", "grch38"}) {
      const auto dir = temp_dir();
      CAPTURE(model, trace);
      const RunResult r =
          run_paradyse(std::string("compare --engine analytic --order sorted --sample 0.02 --model ") +
                       model + " --trace " + trace + " --json --out " + (dir / "run").string());
      REQUIRE(r.exit_code == 0);
      const auto policies = nlohmann::json::parse(r.out).at("policies");
      const std::vector<Row> rows = read_rows(dir / "run" / "per_sequence.csv");
      std::map<std::string, std::map<int64_t, Row>> by_policy;
      for (const Row& row : rows) by_policy[row.policy][row.index] = row;
      const auto& optimal = by_policy.at("optimal");
      for (const auto& [policy, sequences] : by_policy) {
        if (policy.rfind("static:", 0) != 0) continue;
        CAPTURE(policy);
        double static_time = 0, optimal_time = 0;
        for (const auto& [index, row] : sequences) {
          if (!row.fits) continue;
          REQUIRE(optimal.at(index).fits);  // optimal trains every sequence a static policy trains
          static_time += row.time_s;
          optimal_time += optimal.at(index).time_s;
        }
        CHECK(optimal_time <= static_time * (1 + 1e-12));
        CHECK(policies.at("optimal").at("max_len_before_oom").get<int64_t>() >=
              policies.at(policy).at("max_len_before_oom").get<int64_t>());
      }
      std::filesystem::remove_all(dir);
    }
  }
}

TEST_CASE("compare: bad inputs fail with a clear message, a non-zero exit and no output folder",
          "[experiments]") {
  const auto dir = temp_dir();
  const std::string out = (dir / "run").string();
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"--trace no/such/trace.txt", "no/such/trace.txt"},
      {"--trace tests/experiments/data/bad_line_trace.txt", "bad_line_trace.txt:4"},
      {"--trace tests/experiments/data/empty_trace.txt", "empty_trace.txt"},
      {"--trace tests/experiments/data/lengths.csv --column length", "length"},
      {"--trace github-code-like --order random", "--order"},
      {"--trace github-code-like --over cut --max-len 1000", "--over"},
      {"--trace github-code-like --engine fast", "--engine"},
      {"--trace github-code-like --policy nosuch",
       "expected static:NAME[:selective|:full|:offload], paradyse, optimal, paradyse-2d or optimal-2d"},
      {"--trace github-code-like --max-len 16K --global-batch-tokens 1M --micro-batch-tokens 8",
       "--micro-batch-tokens: expected at least the layout's quantum of 16"},
      {"--trace github-code-like --max-len 16K --global-batch-tokens 8K --micro-batch-tokens 4K",
       "--global-batch-tokens: a global batch of 8192 tokens is smaller than sequence"},
      {"--trace github-code-like --global-batch-tokens 1M",
       "needs both --global-batch-tokens and --micro-batch-tokens"},
      {"--trace github-code-like --global-batch 4 --global-batch-tokens 1M --micro-batch-tokens 64K",
       "--global-batch: expected 1 with --global-batch-tokens"},
      {"--trace github-code-like --global-batch-tokens 1X --micro-batch-tokens 64K", "--global-batch-tokens"},
      {"--trace github-code-like --group-policies flexsp", "--group-policies: group policies assign"},
      {"--trace github-code-like --global-batch-tokens 1M --micro-batch-tokens 64K --group-policies fast",
       "expected flexsp, dp-groups or groups"},
      {"--trace github-code-like --max-len 1M --global-batch-tokens 1M --micro-batch-tokens 64K --degree 6 "
       "--group-policies groups",
       "--group-policies: groups of the job's 6 GPUs (--degree): expected a power of two"},
      {"--trace github-code-like --max-len 1M --global-batch-tokens 1M --micro-batch-tokens 64K "
       "--group-policies groups --group-sizes 2,3",
       "--group-sizes: a group of 3 GPUs does not divide the job's 8 GPUs"},
      {"--trace github-code-like --group-sizes 2", "--group-sizes: group sizes are for --group-policies"},
      {"--trace github-code-like --gradient-reduce-dtype fp32",
       "--gradient-reduce-dtype: the type of the grouped step's gradient reduction is for --group-policies"},
      {"--trace github-code-like --max-len 1M --global-batch-tokens 1M --micro-batch-tokens 64K "
       "--group-policies groups --gradient-reduce-dtype fp16",
       "--gradient-reduce-dtype: expected bf16 or fp32, got 'fp16'"},
      {"--trace github-code-like --per-sequence parquet", "--per-sequence: expected csv, csv.gz or none"},
      {"--trace github-code-like --max-len 1M --global-batch-tokens 1M --micro-batch-tokens 64K "
       "--group-policies groups --group-sizes 2,x",
       "--group-sizes"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const RunResult r = run_paradyse("compare " + c.args + " --out " + out);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK(r.out.empty());
    CHECK(!std::filesystem::exists(out));
    CHECK(!std::filesystem::exists(out + ".partial"));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("compare --engine sim: two processes write the same files, byte for byte", "[experiments]") {
  // Separate processes, separate output folders: nothing may depend on addresses, on the folder's
  // name or on anything but the inputs, except the report's one line of wall time.
  const auto dir = temp_dir();
  const std::string args =
      "compare --engine sim --trace github-code-like --order shuffled --seed 5 --limit 12 --max-len 16384 "
      "--out ";
  const RunResult first = run_paradyse(args + (dir / "first").string());
  const RunResult second = run_paradyse(args + (dir / "second").string());
  INFO(first.err << second.err);
  REQUIRE(first.exit_code == 0);
  REQUIRE(second.exit_code == 0);
  CHECK(!read_rows(dir / "first" / "per_sequence.csv").empty());
  for (const char* file : {"summary.json", "per_sequence.csv", "cumulative_time.png", "time_by_length.png"}) {
    INFO(file);
    CHECK(read_text(dir / "second" / file) == read_text(dir / "first" / file));
  }
  auto without_wall_time = [](const std::string& report) {
    const std::size_t line = report.find("- Wall time of the run: ");
    REQUIRE(line != std::string::npos);
    return report.substr(0, line) + report.substr(report.find('\n', line) + 1);
  };
  CHECK(without_wall_time(read_text(dir / "second" / "report.md")) ==
        without_wall_time(read_text(dir / "first" / "report.md")));
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "compare --gradient-reduce-dtype fp32: the group policies' steps reduce in fp32, the statics as before",
    "[experiments]") {
  const auto dir = temp_dir();
  const auto run = [&](const std::string& dtype) {
    const std::string out = (dir / dtype).string();
    const RunResult r = run_paradyse(
        "compare --trace github-code-like --limit 300 --max-len 64K --global-batch-tokens 256K "
        "--micro-batch-tokens 64K --group-policies groups --engine analytic --policy static:ulysses_z "
        "--per-sequence none --gradient-reduce-dtype " +
        dtype + " --out " + out);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::ifstream report(out + "/report.md");
    const std::string text((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
    CHECK_THAT(text, Catch::Contains("gradients reduced in " + dtype));
    return nlohmann::json::parse(std::ifstream(out + "/summary.json"));
  };
  const nlohmann::json bf16 = run("bf16"), fp32 = run("fp32");
  CHECK(bf16.at("gradient_reduce_dtype") == "bf16");
  CHECK(fp32.at("gradient_reduce_dtype") == "fp32");
  const auto total_s = [](const nlohmann::json& j, const char* policy) {
    return j.at("policies").at(policy).at("total_time_s").get<double>();
  };
  // Twice the bytes in each layer's reduce-scatter over the job; the static strategies are untouched.
  CHECK(total_s(fp32, "groups") > total_s(bf16, "groups"));
  CHECK(total_s(fp32, "static:ulysses_z") == total_s(bf16, "static:ulysses_z"));
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "compare --attention-implementation: every policy's attention runs the named kernel, and the run says so",
    "[experiments]") {
  const auto dir = temp_dir();
  const auto run = [&](const std::string& name, const std::string& flags) {
    const std::string out = (dir / name).string();
    const RunResult r = run_paradyse(
        "compare --trace github-code-like --limit 100 --max-len 64K --engine analytic "
        "--policy static:ulysses_z,paradyse --per-sequence none --framework no-host-cost --out " +
        out + flags);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::ifstream report(out + "/report.md");
    const std::string text((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
    CHECK_THAT(text, Catch::Contains("- Framework: no-host-cost"));
    return std::make_pair(nlohmann::json::parse(std::ifstream(out + "/summary.json")), text);
  };
  const auto [own, own_report] = run("own", "");
  const auto [triton, triton_report] = run("triton", " --attention-implementation flash-attention-triton");
  CHECK(own.at("framework") == "no-host-cost");
  CHECK(own.at("attention_implementation") == "");
  CHECK(triton.at("attention_implementation") == "flash-attention-triton");
  CHECK_THAT(triton_report, Catch::Contains("attention by flash-attention-triton"));
  for (const char* policy : {"static:ulysses_z", "paradyse"})
    CHECK(triton.at("policies").at(policy).at("total_time_s").get<double>() >
          own.at("policies").at(policy).at("total_time_s").get<double>());
  std::filesystem::remove_all(dir);
}
