#include "experiments/compare_command.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <thread>

#include "common/output_lock.hpp"
#include "evaluation/compare_job.hpp"
#include "evaluation/tuned_statics.hpp"
#include "experiments/command_table.hpp"
#include "experiments/inputs.hpp"
#include "experiments/progress_bar.hpp"

namespace paradyse::cli {
namespace {

struct CompareCommandOptions {
  evaluation::CompareJob job;
  std::string out = "out/compare";
  std::string per_sequence = "csv";
  bool json = false;
};

void run(const CompareCommandOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const OutputLock lock(options.out, "--out");  // one run at a time into a folder
  const evaluation::PerSequenceFormat per_sequence =
      evaluation::parse_per_sequence_format(options.per_sequence);
  evaluation::CompareOutputs outputs(options.out, per_sequence);
  ProgressBar bar(isatty(STDERR_FILENO) != 0);
  evaluation::CompareJobResult run = evaluation::run_compare_job(
      options.job,
      [&](int64_t done, int64_t total, const std::string& what) { bar.update(done, total, what); },
      &outputs.sink());
  bar.finish();
  const evaluation::CompareResult& result = run.result;
  evaluation::RunDescription& description = run.description;
  outputs.finish(result, description);
  description.wall_s = std::chrono::duration<double>(Clock::now() - start).count();

  if (options.json) {
    std::cout << evaluation::summary_json(result, description).dump(2) << "\n";
    return;
  }
  fmt::print("{} on {} (degree {}, {}), trace {}: {}\n", description.model, description.cluster,
             description.degree, evaluation::steps_text(description), description.trace,
             description.preparation);
  if (const std::string shards = evaluation::shard_group_text(description); !shards.empty())
    fmt::print("{}\n", shards);
  fmt::print("times: {}\n", result.method);
  if (result.interpolation && result.interpolation->count() > 0)
    fmt::print("interpolation error on {} sequences simulated directly: mean {:.3f} %, max {:.3f} %\n",
               result.interpolation->count(), result.interpolation->mean_pct(),
               result.interpolation->max_pct());
  fmt::print("{}", evaluation::summary_table(result));
  fmt::print("{}", evaluation::group_speedups_text(result));
  fmt::print("{}", evaluation::tuned_statics_text(result, description.micro_batch_tokens));
  const std::string per_sequence_file = evaluation::per_sequence_file_name(per_sequence);
  fmt::print("wrote {}/{{summary.json, {}report.md, cumulative_time.png, time_by_length.png}} in {:.1f} s\n",
             options.out, per_sequence_file.empty() ? "" : per_sequence_file + ", ", description.wall_s);
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto options = std::make_shared<CompareCommandOptions>();
  CLI::App* command = app.add_subcommand("compare", command_description("compare"));
  add_machine_options(*command, options->job.machine);
  add_policy_options(*command, options->job.policies);
  command
      ->add_option(
          "--trace", options->job.trace,
          "bundled trace (github-code-like, repo-level-code, grch38, grch38-char) or a file: one length "
          "per line, .csv (--column), .jsonl (--field) or .pb")
      ->capture_default_str();
  const TraceFormatFlags formats =
      add_trace_format_options(*command, options->job.column, options->job.field);
  command
      ->add_option("--order", options->job.order, "dataset, sorted (short to long, the paper's) or shuffled")
      ->capture_default_str();
  command->add_option("--seed", options->job.seed, "seed of --order shuffled and --sample")
      ->capture_default_str();
  CLI::Option* max_len =
      command
          ->add_option("--max-len", options->job.max_len, "cap on sequence length: 4096, 16K, 1M (0: none)")
          ->capture_default_str();
  command->add_option("--over", options->job.over, "what happens above --max-len: drop, truncate or split")
      ->capture_default_str()
      ->needs(max_len);
  command->add_option("--limit", options->job.limit, "train only the first N sequences (0: all)")
      ->capture_default_str();
  command->add_option("--sample", options->job.sample, "keep each sequence with this probability")
      ->capture_default_str();
  command
      ->add_option(
          "--global-batch", options->job.global_batch,
          "sequences per training step, consecutive in the trace's order: each is a micro-batch with "
          "its own plan, gradients accumulate, the optimizer steps once per global batch (1: the "
          "paper's one sequence per step)")
      ->check(positive_whole_number())
      ->capture_default_str();
  command
      ->add_option(
          "--global-batch-tokens", options->job.global_batch_tokens,
          "packed training: tokens per training step (256K, 1M), consecutive sequences in the trace's "
          "order, packed into micro-batches of --micro-batch-tokens by first-fit decreasing; each "
          "micro-batch has its own plan and attention stays within each document (0: not packed)")
      ->capture_default_str();
  command
      ->add_option("--micro-batch-tokens", options->job.micro_batch_tokens,
                   "packed training: padded tokens per micro-batch (32K, 128K); a longer sequence is a "
                   "micro-batch of its own")
      ->capture_default_str();
  command->add_option(
      "--tune-statics", options->job.tune_budgets,
      "packed training: also run every static policy at these micro-batch budgets (comma-separated, "
      "e.g. 32K,128K,512K; named static:NAME@BUDGET) and take each at its best one, the budget at which "
      "it trains the most tokens and, of those, the fastest; every other policy's gain is then given "
      "against the fastest static at --micro-batch-tokens, the fastest tuned static and the tuned "
      "static that trains the most");
  command
      ->add_option(
          "--group-policies", options->job.group_policies,
          "with packed training, also these policies that split the GPUs into groups training "
          "different sequences at once, comma-separated: flexsp (groups of any size, Ulysses in "
          "each), dp-groups (one group size per step, each micro-batch on its fastest per-layer plan), "
          "groups (any sizes, each micro-batch on its fastest per-layer plan; with --recompute-choices "
          "each layer's recomputation too, and on a cluster with a host link its activation offload); "
          "the GPUs must be a power of two")
      ->capture_default_str();
  command
      ->add_option("--group-sizes", options->job.group_sizes,
                   "group policies: the group sizes they may use, comma-separated powers of two that "
                   "divide the GPUs (default: every one)")
      ->delimiter(',');
  command
      ->add_option(
          "--gradient-reduce-dtype", options->job.gradient_reduce_dtype,
          "group policies: what each layer's gradient is summed and reduce-scattered in, bf16 (the "
          "weights' type, as the static strategies and DeepSpeed ZeRO-3 reduce) or fp32 (FSDP with an "
          "fp32 reduce_dtype, as Composer's DEFAULT mixed precision and TorchTitan's default): twice "
          "the bytes on the wire and in the gradient buffer")
      ->capture_default_str();
  command
      ->add_option("--shard-group", options->job.shard_group,
                   "group policies: what each weight is sharded over, job (every GPU holds 1/N of it, "
                   "gathered over all N for every layer: FSDP's FULL_SHARD) or node (every node holds a "
                   "replica, 1/G of it on each of its G GPUs, gathered over NVLink; gradients then "
                   "all-reduced across the nodes: FSDP's HYBRID_SHARD)")
      ->capture_default_str();
  command->add_option("--engine", options->job.engine, "sim (the simulator times every step) or analytic")
      ->capture_default_str();
  command
      ->add_option("--grid-ratio", options->job.grid_ratio,
                   "sim: simulate each plan at lengths this far apart and interpolate between them (0: every "
                   "length); the error is measured and reported")
      ->capture_default_str();
  options->job.jobs = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  command
      ->add_option("--jobs", options->job.jobs,
                   "sim: simulations run at once, each in a process of its own (default: one per core); "
                   "the results are the same, bit for bit, whatever the count")
      ->check(positive_whole_number())
      ->capture_default_str();
  command->add_option("--out", options->out, "folder for the report, tables and plots")
      ->capture_default_str();
  command
      ->add_option("--per-sequence", options->per_sequence,
                   "every micro-batch's result, written as the run goes: csv (per_sequence.csv), csv.gz "
                   "(per_sequence.csv.gz, gzip) or none; the summary, report and plots never need it")
      ->capture_default_str();
  command->add_flag("--json", options->json, "print summary.json instead of the table");
  command->callback([options, formats] {
    formats.check(options->job.trace);
    run(*options);
  });
}

}  // namespace paradyse::cli
