#include "experiments/bench_groups_command.hpp"

#include <fmt/core.h>

#include <sys/resource.h>
#include <unistd.h>

#include <memory>

#include "common/errors.hpp"
#include "evaluation/group_bench.hpp"
#include "evaluation/options.hpp"
#include "experiments/command_table.hpp"
#include "experiments/inputs.hpp"
#include "experiments/progress_bar.hpp"
#include "traces/trace.hpp"

namespace paradyse::cli {
namespace {

struct BenchGroupsOptions {
  evaluation::MachineOptions machine;
  std::string trace = "github-code-like";
  std::string batch_tokens = "1M";
  evaluation::GroupBenchOptions bench;
};

void bench(BenchGroupsOptions& options) {
  options.bench.large_batch_tokens = evaluation::parse_length(options.batch_tokens, "--batch-tokens");
  if (options.bench.small_instances < 1 || options.bench.small_sequences < 1 || options.bench.large_steps < 1)
    throw InputError("--instances", 0, "", "expected positive counts of instances, sequences and steps");
  if (options.bench.milp_time_limit_s <= 0)
    throw InputError("--milp-time-limit", 0, "", "expected seconds > 0");
  const ModelSpec model = options.machine.load_model();
  const hw::ClusterSpec node = options.machine.load_cluster();
  const auto nodes_for = [&](int gpus) {
    if (gpus < 1 || (gpus & (gpus - 1)) != 0)
      throw InputError("--small-gpus/--large-gpus", 0, "",
                       "expected a power of two, got " + std::to_string(gpus));
    return std::max(1, (gpus + node.gpus_per_node - 1) / node.gpus_per_node);
  };
  evaluation::MachineOptions small_machine = options.machine, large_machine = options.machine,
                             simulate_machine = options.machine;
  small_machine.nodes = nodes_for(options.bench.small_job);
  large_machine.nodes = nodes_for(options.bench.large_job);
  simulate_machine.nodes = options.bench.simulate_job > 0 ? nodes_for(options.bench.simulate_job) : 1;
  const traces::Trace trace = traces::load_trace(options.trace);
  ProgressBar bar(isatty(STDERR_FILENO) != 0);
  const evaluation::GroupBenchResult r = evaluation::bench_group_solver(
      model, small_machine.load_cluster(), large_machine.load_cluster(), simulate_machine.load_cluster(),
      trace.lengths, options.bench, [&bar](std::string_view what, uint64_t done, uint64_t total) {
        bar.update(static_cast<int64_t>(done), static_cast<int64_t>(total), std::string(what));
      });
  bar.finish();

  using evaluation::percentile;
  const auto pct = [](double fraction) { return 100 * fraction; };
  fmt::print(
      "group solver: {} on {}, batches of {}, each sequence priced by {} at every group degree, weights "
      "sharded over {}\n",
      model.name, node.name, trace.name, options.bench.policy,
      options.bench.shard_group == "node" ? "each node (hybrid sharding)" : "the job");
  fmt::print(
      "small batches: {} of {} sequences on {} GPUs, against the exact MILP (COIN-OR CBC, {:g} s limit)\n",
      options.bench.small_instances, options.bench.small_sequences, options.bench.small_job,
      options.bench.milp_time_limit_s);
  if (r.gaps.empty()) {
    fmt::print("  CBC proved no instance optimal within its limit\n");
  } else {
    fmt::print(
        "  greedy over optimum: median {:+.2f} %, p99 {:+.2f} %, max {:+.2f} % ({} proven optimal, {} not)\n",
        pct(percentile(r.gaps, 50)), pct(percentile(r.gaps, 99)), pct(percentile(r.gaps, 100)), r.gaps.size(),
        r.small_unproven);
  }
  fmt::print("  MILP solve: median {:.0f} ms, p99 {:.0f} ms\n", 1e3 * percentile(r.milp_s, 50),
             1e3 * percentile(r.milp_s, 99));
  if (r.greedy_s.empty()) {
    fmt::print("large batches: none (every sequence of the trace is longer than --batch-tokens)\n");
    return;
  }
  fmt::print("large batches: {} steps of up to {} tokens on {} GPUs, consecutive in the trace\n",
             r.greedy_s.size(), options.bench.large_batch_tokens, options.bench.large_job);
  fmt::print("  greedy solve: median {:.3f} ms, p99 {:.3f} ms\n", 1e3 * percentile(r.greedy_s, 50),
             1e3 * percentile(r.greedy_s, 99));
  fmt::print("  pricing a batch first (cost model, cached by length): median {:.1f} ms, p99 {:.1f} ms\n",
             1e3 * percentile(r.pricing_s, 50), 1e3 * percentile(r.pricing_s, 99));
  fmt::print(
      "  per step (medians): {:.0f} sequences, {:.0f} round(s), imbalance (slowest group over mean) {:.2f}\n",
      percentile(r.sequences, 50), percentile(r.rounds, 50), percentile(r.imbalance, 50));
  if (options.bench.simulate_job > 0) {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    fmt::print(
        "one grouped step simulated on {} GPUs (the first large batch, {} round(s), {} events: {} kernels, "
        "{} "
        "flows, {} collectives timed analytically): {:.2f} s to trace and simulate, {:.3f} s simulated; "
        "maximum resident memory of the whole run {:.0f} MiB\n",
        options.bench.simulate_job, r.simulated_rounds,
        r.simulated_kernels + r.simulated_flows + r.analytic_collectives, r.simulated_kernels,
        r.simulated_flows, r.analytic_collectives, r.simulate_wall_s, r.simulated_s,
        static_cast<double>(usage.ru_maxrss) / 1024);  // Linux: kilobytes
  }
}

}  // namespace

void add_bench_groups_command(CLI::App& app) {
  auto options = std::make_shared<BenchGroupsOptions>();
  CLI::App* command = app.add_subcommand("bench-groups", command_description("bench-groups"));
  add_machine_options(*command, options->machine);
  command->add_option("--trace", options->trace, "bundled trace or a file, as compare reads it")
      ->capture_default_str();
  command
      ->add_option("--policy", options->bench.policy,
                   "prices each sequence on each group degree: switching (the fastest per-layer plan in the "
                   "grouped step), static:NAME, paradyse or optimal")
      ->capture_default_str();
  command
      ->add_option("--shard-group", options->bench.shard_group,
                   "what the weights are sharded over: job (every GPU of each job) or node (each node a "
                   "replica: hybrid sharding), as compare's --shard-group")
      ->capture_default_str();
  command->add_option("--instances", options->bench.small_instances, "small batches solved by the MILP too")
      ->capture_default_str();
  command->add_option("--sequences", options->bench.small_sequences, "sequences per small batch")
      ->capture_default_str();
  command
      ->add_option("--small-gpus", options->bench.small_job, "GPUs of a small batch's job (a power of two)")
      ->capture_default_str();
  command
      ->add_option("--milp-time-limit", options->bench.milp_time_limit_s,
                   "seconds CBC may take per small batch")
      ->capture_default_str();
  command
      ->add_option("--large-gpus", options->bench.large_job, "GPUs of a large batch's job (a power of two)")
      ->capture_default_str();
  command->add_option("--steps", options->bench.large_steps, "large batches")->capture_default_str();
  command->add_option("--batch-tokens", options->batch_tokens, "tokens per large batch (1M = 1048576)")
      ->capture_default_str();
  command->add_option("--seed", options->bench.seed, "draws the small batches")->capture_default_str();
  command
      ->add_option("--simulate-gpus", options->bench.simulate_job,
                   "simulate the first large batch's grouped step on this many GPUs (a power of two; 0: not)")
      ->capture_default_str();
  add_max_flows_option(*command, options->bench.max_flows_per_collective);
  command->callback([options] { bench(*options); });
}

}  // namespace paradyse::cli
