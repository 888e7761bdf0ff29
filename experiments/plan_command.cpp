#include "experiments/plan_command.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/units.hpp"
#include "experiments/inputs.hpp"
#include "selector/decision_json.hpp"
#include "selector/longest_length.hpp"
#include "selector/optimal_policy.hpp"
#include "selector/paradyse_policy.hpp"
#include "strategies/micro_batch.hpp"

namespace paradyse::cli {
namespace {

struct PlanOptions {
  evaluation::MachineOptions machine;
  evaluation::PolicyOptions policies;
  std::string lengths;
  std::string documents;  // one packed micro-batch instead of lengths
  bool longest = false;
  std::string max_seq = "16M";
  bool json = false;
};

// What --longest finds for one policy.
struct LongestLength {
  std::string policy;
  int64_t longest_seq = 0;  // 0 when not even the shortest length fits
  std::string plan;         // plan_runs_name() of the plan at that length
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LongestLength, policy, longest_seq, plan)

void run(const PlanOptions& options) {
  if (options.longest && !(options.lengths.empty() && options.documents.empty()))
    throw InputError("--longest", 0, "", "expected one of --seq LENGTHS, --docs DOCUMENTS or --longest");
  const std::vector<MicroBatch> micro_batches =
      options.longest ? std::vector<MicroBatch>{}
                      : parse_micro_batches(options.lengths, options.documents, "--longest");
  const int64_t max_seq = evaluation::parse_length(options.max_seq, "--max-seq");
  evaluation::PolicySet set = options.policies.build(options.machine);

  if (options.longest) {
    std::vector<LongestLength> found;
    if (!options.json)
      fmt::print("longest length each policy plans within memory ({} on {}, cost model {}):\n",
                 set.model.name, set.cluster.name, set.source->name());
    for (auto& policy : set.policies) {
      const auto [tokens, decision] = selector::longest_length(*policy, max_seq);
      if (options.json) {
        found.push_back({policy->name(), tokens, plan_runs_name(decision.plan)});
        continue;
      }
      fmt::print("{:<22} {:>9} {}\n", policy->name(), tokens,
                 tokens > 0 ? plan_runs_name(decision.plan) : "");
    }
    if (options.json) std::cout << nlohmann::json(found).dump(2) << "\n";
    return;
  }

  std::vector<selector::Decision> decisions;
  for (auto& policy : set.policies)
    for (const MicroBatch& micro_batch : micro_batches) decisions.push_back(policy->decide(micro_batch));
  if (options.json) {
    const nlohmann::json out = decisions;
    std::cout << (decisions.size() == 1 ? out[0] : out).dump(2) << "\n";
    return;
  }
  fmt::print("{} on {}, degree {}, cost model {}\n", set.model.name, set.cluster.name, set.degree,
             set.source->name());
  fmt::print("{:<22} {:>8} {:>12} {:>9} {:>5} {:>8}  {}\n", "policy", "seq", "predicted_ms", "peak_GiB",
             "fits", "switches", "plan");
  for (const selector::Decision& d : decisions)
    fmt::print("{:<22} {:>8} {:>12.2f} {:>9.2f} {:>5} {:>8}  {}{}\n", d.policy, d.tokens, d.predicted_s * 1e3,
               d.predicted_peak_bytes / kGiB, d.fits ? "yes" : "OOM", d.switches, plan_runs_name(d.plan),
               d.fallback ? " (nothing fits: the leanest)" : "");
}

struct BenchPlanOptions {
  evaluation::MachineOptions machine;
  std::string length = "128K";
  int layers = 96;
  int decisions = 2000;
};

// A table of `layers` layers from the model's real layer costs at one length, with the memory limit
// half way between the leanest and the fastest uniform plan, so that the decision must mix.
steps::CostTable bench_table(selector::AnalyticCostSource& source, int64_t tokens, int layers) {
  steps::CostTable table = source.table(MicroBatch::sequence(tokens), selector::all_candidates());
  table.num_layers = layers;
  double fastest_s = 0, fastest_peak = 0, leanest_peak = 0;
  for (int c = 0; c < static_cast<int>(table.candidates.size()); ++c) {
    const auto uniform = selector::uniform_choice(table, c);
    const double seconds = table.plan_s(uniform), peak = table.plan_peak_bytes(uniform);
    if (c == 0 || seconds < fastest_s) {
      fastest_s = seconds;
      fastest_peak = peak;
    }
    leanest_peak = c == 0 ? peak : std::min(leanest_peak, peak);
  }
  table.step.capacity_bytes = (leanest_peak + fastest_peak) / 2;
  return table;
}

void bench(const BenchPlanOptions& options) {
  const std::vector<int64_t> lengths = evaluation::parse_lengths(options.length, "--seq");
  if (lengths.size() != 1) throw InputError("--seq", 0, "", "expected one sequence length");
  if (options.layers < 1) throw InputError("--layers", 0, "", "expected a positive layer count");
  if (options.decisions < 1) throw InputError("--decisions", 0, "", "expected a positive count");
  selector::AnalyticCostSource source(options.machine.load_model(), options.machine.load_cluster());
  const steps::CostTable table = bench_table(source, lengths.front(), options.layers);
  selector::ParadyseOptions paradyse_options;
  paradyse_options.cache = false;
  paradyse_options.gamma = 0;
  selector::ParadysePolicy paradyse(source, paradyse_options);
  selector::OptimalPolicy optimal(source, {});
  using Clock = std::chrono::steady_clock;
  fmt::print(
      "decisions on a table of {} layers x {} strategies ({} layer costs at {} tokens on {}, memory limit "
      "half way between the leanest and the fastest plan), uncached, {} decisions each:\n",
      options.layers, table.candidates.size(), options.machine.model, lengths.front(),
      options.machine.cluster, options.decisions);
  fmt::print("{:<10} {:>14} {:>10} {:>10} {:>10}  {}\n", "policy", "decisions_per_s", "median_us", "p99_us",
             "evaluated", "plan");
  const auto measure = [&](const char* name, auto&& decide) {
    std::vector<double> micros;
    selector::Decision last;
    for (int i = 0; i < options.decisions; ++i) {
      const auto start = Clock::now();
      last = decide();
      micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    std::sort(micros.begin(), micros.end());
    double total = 0;
    for (double m : micros) total += m;
    const double p99 = micros[std::min(micros.size() - 1, micros.size() * 99 / 100)];
    fmt::print("{:<10} {:>14.0f} {:>10.1f} {:>10.1f} {:>10}  {}\n", name,
               static_cast<double>(micros.size()) / total * 1e6, micros[micros.size() / 2], p99,
               last.evaluated_plans, plan_runs_name(last.plan));
  };
  measure("paradyse", [&] { return paradyse.decide(table); });
  measure("optimal", [&] { return optimal.decide(table); });
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* command = app.add_subcommand(
      "plan",
      "The plan (a strategy per layer) each policy chooses for sequences of the given lengths, in the "
      "given order, with its predicted time, peak memory and number of strategy switches; or, with "
      "--longest, the longest length each policy can plan without running out of memory.");
  add_machine_options(*command, options->machine);
  add_policy_options(*command, options->policies);
  command->add_option("--seq", options->lengths,
                      "sequence length(s) in tokens, decided in this order: 4096, 16K");
  add_documents_option(*command, options->documents);
  command->add_flag("--longest", options->longest,
                    "print the longest length each policy plans within memory");
  command->add_option("--max-seq", options->max_seq, "longest length --longest tries (e.g. 16M)")
      ->capture_default_str();
  command->add_flag("--json", options->json, "print JSON instead of a table");
  command->callback([options] { run(*options); });
}

void add_bench_plan_command(CLI::App& app) {
  auto options = std::make_shared<BenchPlanOptions>();
  CLI::App* command = app.add_subcommand(
      "bench-plan",
      "Benchmark: decisions per second and per-decision latency (median, p99) of the paradyse and optimal "
      "policies on a table of many layers, uncached.");
  add_machine_options(*command, options->machine);
  command->add_option("--seq", options->length, "length whose layer costs fill the table")
      ->capture_default_str();
  command->add_option("--layers", options->layers, "layers in the table")->capture_default_str();
  command->add_option("--decisions", options->decisions, "decisions timed per policy")->capture_default_str();
  command->callback([options] { bench(*options); });
}

}  // namespace paradyse::cli
