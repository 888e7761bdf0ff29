// The flags of the options shared by the subcommands: each binds a command's flags to the
// evaluation library's option structs, which check the values.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "evaluation/options.hpp"
#include "steps/estimate.hpp"
#include "strategies/micro_batch.hpp"

namespace paradyse::cli {

// --model, --attention, --cluster, --nodes, --framework.
// --attention, --attention-kernel and --loss-kernel (evaluation::model_overrides reads them).
void add_model_overrides(CLI::App& command, std::string& attention, std::string& attention_kernel,
                         std::string& loss_kernel);
void add_machine_options(CLI::App& command, evaluation::MachineOptions& options);
// A count flag's check: CLI11's PositiveNumber names the whole double range in its message; this one
// says what was expected. No count paradyse takes reaches 2^31: a larger one is a typo, and would not
// fit an int flag.
CLI::Validator positive_whole_number(int64_t max = INT32_MAX);
CLI::Validator whole_number_in(int64_t low, int64_t high);
// --degree (unset: every GPU of the cluster) and --batch, both positive.
void add_degree_and_batch_options(CLI::App& command, int& degree, int64_t& batch);
// --policy, --costmodel, --degree, --batch, --gamma, --exclude and the ablation switches.
void add_micro_batches_option(CLI::App& command, int64_t& micro_batches);
void add_policy_options(CLI::App& command, evaluation::PolicyOptions& options);
// --max-flows-per-collective: past it, a collective takes the analytic model's time on the routed network.
void add_max_flows_option(CLI::App& command, int& max_flows_per_collective);
// --recompute: every layer's activation recomputation, none, selective or full, or offload.
void add_recompute_option(CLI::App& command, std::string& recompute);
// --docs: one packed micro-batch, its documents' tokens comma-separated.
void add_documents_option(CLI::App& command, std::string& documents);
// What --seq LENGTHS (one sequence each) or --docs DOCUMENTS (one packed micro-batch) asks for;
// InputError unless exactly one of them is given (`others`: the alternatives a command also has,
// named in that error).
std::vector<MicroBatch> parse_micro_batches(const std::string& lengths, const std::string& documents,
                                            const std::string& others = "");

// The framework whose host costs `cluster` prices calls with, for a report's first line: its name, or
// what stands in its place (the cluster file's own host block, or none).
std::string framework_text(const hw::ClusterSpec& cluster);

// One plan's training step, as `simulate` and `export` take it: --plan, --seq or --docs, --degree,
// --batch, --micro-batches and --recompute.
struct StepFlags {
  std::string plan;
  std::string length;
  std::string documents;  // one packed micro-batch instead of length
  int degree = 0;
  int64_t batch = 1;
  int64_t micro_batches = 1;
  std::string recompute = "none";
};
// Adds the flags; `plan_help` says what --plan is to the command. Returns --plan's option.
CLI::Option* add_step_flags(CLI::App& command, StepFlags& flags, const std::string& plan_help);
// The plan, every layer with --recompute's recomputation.
Plan parse_step_plan(const StepFlags& flags, const ModelSpec& model);
// The step's request: InputError unless the flags give one sequence length or one packed micro-batch.
steps::EstimateRequest parse_step_request(const StepFlags& flags);
// InputError naming the first of `flags` given on `command`, which `instead` (a flag of another way
// to describe the step) replaces.
void refuse_with(const CLI::App& command, std::initializer_list<const char*> flags,
                 const std::string& instead, const std::string& why);

// --column and --field, which only a .csv and a .jsonl trace read.
struct TraceFormatFlags {
  CLI::Option* column = nullptr;
  CLI::Option* field = nullptr;
  // InputError when --column or --field was given for a trace of another format, which would ignore it.
  void check(const std::string& trace) const;
};
TraceFormatFlags add_trace_format_options(CLI::App& command, std::string& column, std::string& field);

}  // namespace paradyse::cli
