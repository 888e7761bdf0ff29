// `paradyse export`: writes the per-rank programs of one training step as MLCommons Chakra execution
// traces and ASTRA-sim's communicator-group file. The work is steps/' (tracing the step) and
// chakra/'s (the files); this file parses flags and prints what it wrote.
#include "experiments/export_command.hpp"

#include <fmt/core.h>

#include "chakra/export.hpp"
#include "common/atomic_file.hpp"
#include "common/errors.hpp"
#include "evaluation/grouped_step_option.hpp"
#include "experiments/inputs.hpp"
#include "steps/step_programs.hpp"

namespace paradyse::cli {
namespace {

struct ExportOptions {
  evaluation::MachineOptions machine;
  StepFlags step;
  std::string groups;
  std::string shard_group = "job";
  std::string gradient_reduce_dtype = "bf16";
  std::string out;
  std::string comm_group_file;
};

void run(const ExportOptions& options, const CLI::App& command) {
  const ModelSpec model = options.machine.load_model();
  const hw::ClusterSpec cluster = options.machine.load_cluster();
  const Plan plan = parse_step_plan(options.step, model);
  const std::string comm_group_file =
      options.comm_group_file.empty() ? options.out + ".comm_groups.json" : options.comm_group_file;
  check_output_path(chakra::rank_trace_path(options.out, 0), OutputKind::file, "--out");
  check_output_path(comm_group_file, OutputKind::file, "--comm-group-file");

  steps::StepPrograms step;
  chakra::TraceMetadata metadata;
  if (!options.groups.empty()) {
    refuse_with(command, {"--seq", "--docs", "--degree", "--batch", "--micro-batches"}, "--groups",
                "which gives every group's degree and tokens");
    GroupedStepSpec spec = evaluation::parse_grouped_step(options.groups, model, plan);
    spec.shard_degree =
        evaluation::parse_shard_group(options.shard_group, cluster, steps::grouped_step_job(spec));
    spec.gradient_reduce_dtype = evaluation::parse_gradient_reduce_dtype(options.gradient_reduce_dtype);
    step = steps::trace_grouped_step_programs(spec, cluster);
    metadata.description = fmt::format(
        "{}, plan {}, grouped step {} (weights sharded over the {}, gradients reduced in {}), on {}",
        model.name, plan_name(plan), options.groups, options.shard_group, options.gradient_reduce_dtype,
        cluster.name);
  } else {
    for (const char* flag : {"--shard-group", "--gradient-reduce-dtype"})
      if (command.count(flag) > 0)
        throw InputError(flag, 0, "", std::string("expected ") + flag + " only with --groups");
    const steps::EstimateRequest request = parse_step_request(options.step);
    step = steps::trace_plan_step(model, cluster, plan, request);
    metadata.description = fmt::format("{}, plan {}, seq {}", model.name, plan_name(plan), request.tokens);
    if (step.documents > 1) metadata.description += fmt::format(" in {} packed documents", step.documents);
    if (step.padded_tokens != request.tokens)
      metadata.description += fmt::format(" (padded to {})", step.padded_tokens);
    metadata.description += fmt::format(", batch {}", request.batch);
    if (request.micro_batches > 1)
      metadata.description += fmt::format(" × {} micro-batches", request.micro_batches);
    metadata.description += fmt::format(", degree {}, on {}", step.programs.size(), cluster.name);
  }
  metadata.static_bytes = step.static_bytes;
  const chakra::ExportedTraces exported =
      chakra::write_chakra_traces(step.programs, cluster, metadata, options.out, comm_group_file);
  fmt::print("{}\n", metadata.description);
  fmt::print("wrote {} ... {} ({} ranks, {} nodes) and {} ({} communicator groups)\n", exported.files.front(),
             exported.files.back(), exported.files.size(), exported.nodes, exported.comm_group_file,
             exported.groups);
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* command = app.add_subcommand(
      "export",
      "Write one training step's per-rank programs (a plan at one sequence length or packed micro-batch, or "
      "a "
      "grouped step with --groups) as MLCommons Chakra execution traces, one file per rank, <out>.<rank>.et, "
      "and the communicator-group JSON that ASTRA-sim reads (--comm-group-file). Compute nodes carry their "
      "time as paradyse prices it on the cluster, their FLOPs and bytes; collectives, sends and receives "
      "their sizes and groups; dependencies follow each op's inputs and its stream's order. "
      "`paradyse simulate --chakra <out>` runs them back (docs/chakra.md).");
  add_machine_options(*command, options->machine);
  add_step_flags(*command, options->step,
                 "one strategy for every layer, or a comma-separated strategy per layer (" +
                     strategy_names() + "); with --groups, every group's")
      ->required();
  command->add_option(
      "--groups", options->groups,
      "a grouped step instead of --seq: rounds separated by '/', each its groups in rank order "
      "separated by ',', each DEGREE:TOKENS (documents packed into one micro-batch joined by "
      "'+'), e.g. 4:16K,2:8K,2:4K+4K/8:32K");
  command
      ->add_option("--shard-group", options->shard_group,
                   "with --groups: what the weights are sharded over, job or node (each node a replica: "
                   "hybrid sharding)")
      ->capture_default_str();
  command
      ->add_option(
          "--gradient-reduce-dtype", options->gradient_reduce_dtype,
          "with --groups: what each layer's gradient is summed and reduce-scattered in, bf16 or fp32 "
          "(FSDP's reduce_dtype float32: twice the bytes)")
      ->capture_default_str();
  command->add_option("--out", options->out, "the traces' path prefix: writes <out>.0.et, <out>.1.et, ...")
      ->required();
  command->add_option("--comm-group-file", options->comm_group_file,
                      "where to write the communicator groups, {\"<pg_name>\": [ranks...]} (default: "
                      "<out>.comm_groups.json)");
  command->callback([options, command] { run(*options, *command); });
}

}  // namespace paradyse::cli
