#include "experiments/inputs.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <filesystem>

#include "common/errors.hpp"

namespace paradyse::cli {

CLI::Validator whole_number_in(int64_t low, int64_t high) {
  return CLI::Validator(
      [low, high](std::string& text) -> std::string {
        long long value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error == std::errc() && end == text.data() + text.size() && value >= low && value <= high)
          return "";
        return (low == 1
                    ? "expected a positive whole number up to " + std::to_string(high)
                    : "expected a whole number from " + std::to_string(low) + " to " + std::to_string(high)) +
               ", got '" + text + "'";
      },
      low == 1 ? "POSITIVE" : "");
}

CLI::Validator positive_whole_number(int64_t max) {
  return whole_number_in(1, max);
}

void add_model_overrides(CLI::App& command, std::string& attention, std::string& attention_kernel,
                         std::string& loss_kernel) {
  command
      .add_option("--attention", attention, "override the model's attention mask: causal or bidirectional")
      ->check(CLI::IsMember({"causal", "bidirectional"}));
  command
      .add_option(
          "--attention-kernel", attention_kernel,
          "override the model's attention kernel where a strategy may choose (megatron_ts, "
          "megatron_tp, ulysses_z): flash (FlashAttention-2) or unfused (QKᵀ, softmax, dropout, ×V with the "
          "s×s scores in memory; the file's attn_implementation 'eager'). Ring strategies always "
          "run flash, colossal_z always unfused")
      ->check(CLI::IsMember({"flash", "unfused"}));
  command
      .add_option("--loss-kernel", loss_kernel,
                  "the cross-entropy over the head's logits: fused (default: one kernel over chunks of the "
                  "tokens, bf16 logits) or unfused (Megatron-LM's default: the whole sequence's logits in "
                  "fp32, their softmax kept for backward)")
      ->check(CLI::IsMember({"fused", "unfused"}));
}

void add_machine_options(CLI::App& command, evaluation::MachineOptions& options) {
  command
      .add_option("--model", options.model,
                  fmt::format("model preset ({}) or a Hugging Face config.json",
                              fmt::join(model_preset_names(), ", ")))
      ->capture_default_str();
  add_model_overrides(command, options.attention, options.attention_kernel, options.loss_kernel);
  command
      .add_option("--cluster", options.cluster,
                  fmt::format("cluster preset ({}) or a cluster JSON file",
                              fmt::join(hw::cluster_preset_names(), ", ")))
      ->capture_default_str();
  command.add_option("--nodes", options.nodes, "number of nodes of the cluster preset")
      ->check(positive_whole_number())
      ->capture_default_str();
  command.add_option("--framework", options.framework,
                     fmt::format("how the host issues the step's calls: a framework preset ({}) or a "
                                 "framework JSON file (default: the cluster's; docs/inputs.md#frameworks)",
                                 fmt::join(hw::framework_preset_names(), ", ")));
  command.add_option("--attention-implementation", options.attention_implementation,
                     "the fused attention kernel the framework runs, where the cluster's GPU has measured "
                     "figures for it (dgx-a100 and the H100 presets: flash-attention-triton, the Triton "
                     "FlashAttention that MPT ran); default: the GPU's own curves, FlashAttention-2 "
                     "(docs/inputs.md#attention-implementations)");
}

void add_degree_and_batch_options(CLI::App& command, int& degree, int64_t& batch) {
  command.add_option("--degree", degree, "parallel degree P (default: every GPU of the cluster)")
      ->check(positive_whole_number());
  command.add_option("--batch", batch, "sequences per micro-batch")
      ->check(positive_whole_number())
      ->capture_default_str();
}

void add_max_flows_option(CLI::App& command, int& max_flows_per_collective) {
  command
      .add_option("--max-flows-per-collective", max_flows_per_collective,
                  "a collective needing more network flows than this is timed by the analytic model on the "
                  "routed network (its flows' most loaded link) instead of simulated flow by flow, which "
                  "also leaves out its contention with other collectives; 0: every collective, for jobs of "
                  "thousands of GPUs")
      ->check(whole_number_in(0, INT32_MAX))
      ->capture_default_str();
}

void add_micro_batches_option(CLI::App& command, int64_t& micro_batches) {
  command
      .add_option("--micro-batches", micro_batches,
                  "micro-batches of a global batch (gradient accumulation): each runs its forward and "
                  "backward in turn, then the optimizer steps once; times are the whole global batch's")
      ->check(positive_whole_number())
      ->capture_default_str();
}

void add_policy_options(CLI::App& command, evaluation::PolicyOptions& options) {
  command
      .add_option(
          "--policy", options.policies,
          "comma-separated policies: static:NAME (every layer NAME; static:NAME:selective, :full or "
          ":offload with that recomputation on every layer, offload being each layer's activations but "
          "the last's in host memory), paradyse (the paper's Algorithm 1), "
          "optimal (the exact minimum-time plan within memory), paradyse-2d and optimal-2d (the same, "
          "choosing also among the 2-D strategies usp_uN and tp_cp_tN); 'all' for every static strategy "
          "of the paper's five the model allows, paradyse and optimal; 'all-2d' for those, every 2-D "
          "static strategy the model allows at the degree, paradyse-2d and optimal-2d; either may stand "
          "beside others (all,static:ulysses_z:offload)")
      ->capture_default_str();
  command
      .add_option("--costmodel", options.costmodel,
                  "'analytic' (traced programs priced on the cluster) or a learned model file from "
                  "'paradyse costmodel fit'")
      ->capture_default_str();
  add_degree_and_batch_options(command, options.degree, options.batch);
  command
      .add_option("--gamma", options.gamma,
                  "paradyse: keep the previous plan within this fraction of the best")
      ->capture_default_str();
  command.add_option("--exclude", options.exclude,
                     "comma-separated strategies paradyse and optimal may not use");
  command.add_flag("--no-pruning", options.no_pruning,
                   "paradyse: keep strategies slower and not leaner than another");
  command.add_flag("--no-early-termination", options.no_early_termination,
                   "paradyse: search mixes even when the fastest strategy fits");
  command.add_flag("--no-mixes", options.no_mixes, "paradyse: uniform plans only");
  command.add_flag("--no-short-circuit", options.no_short_circuit,
                   "paradyse: price every mix of a pair, not only up to its first out-of-memory one");
  command.add_flag("--no-cache", options.no_cache, "paradyse: decide again at a length seen before");
  command.add_flag("--no-fallback", options.no_fallback,
                   "paradyse: no plan (instead of the leanest) when nothing fits");
  command.add_flag("--recompute-choices", options.recompute_choices,
                   "optimal and the group policies dp-groups and groups: also choose each layer's activation "
                   "recomputation (none, selective, full); the group policies also offload (on a cluster "
                   "with a host link)");
}

void add_recompute_option(CLI::App& command, std::string& recompute) {
  command
      .add_option(
          "--recompute", recompute,
          "activation recomputation: none, selective or full; or offload (nothing recomputed, each "
          "layer's activations but the last's kept in host memory between forward and backward: needs "
          "a cluster with a host link)")
      ->capture_default_str();
}

void add_documents_option(CLI::App& command, std::string& documents) {
  command.add_option(
      "--docs", documents,
      "one packed micro-batch instead of --seq: its documents' tokens, comma-separated (32K,8K,500); "
      "each is padded on its own to the layout's multiple, laid end to end, and attention stays "
      "within each");
}

std::vector<MicroBatch> parse_micro_batches(const std::string& lengths, const std::string& documents,
                                            const std::string& others) {
  if (lengths.empty() == documents.empty())
    throw InputError(
        "--seq", 0, "",
        "expected one of --seq LENGTHS, --docs DOCUMENTS" + (others.empty() ? "" : " or " + others));
  if (!documents.empty()) return {MicroBatch{evaluation::parse_lengths(documents, "--docs")}};
  std::vector<MicroBatch> micro_batches;
  for (const int64_t tokens : evaluation::parse_lengths(lengths, "--seq"))
    micro_batches.push_back(MicroBatch::sequence(tokens));
  return micro_batches;
}

std::string framework_text(const hw::ClusterSpec& cluster) {
  std::string text = !cluster.framework.empty() ? cluster.framework
                     : cluster.host.dispatches_at_a_cost() || cluster.host.synchronous
                         ? "the cluster file's host block"
                         : "none: calls issue at no cost";
  if (!cluster.attention_implementation.empty()) text += ", attention " + cluster.attention_implementation;
  return text;
}

CLI::Option* add_step_flags(CLI::App& command, StepFlags& flags, const std::string& plan_help) {
  CLI::Option* plan = command.add_option("--plan", flags.plan, plan_help);
  command.add_option("--seq", flags.length, "sequence length in tokens: 4096, 16K, 1M");
  add_documents_option(command, flags.documents);
  add_degree_and_batch_options(command, flags.degree, flags.batch);
  add_micro_batches_option(command, flags.micro_batches);
  add_recompute_option(command, flags.recompute);
  return plan;
}

Plan parse_step_plan(const StepFlags& flags, const ModelSpec& model) {
  return evaluation::parse_plan(flags.plan, model, evaluation::parse_recompute_flag(flags.recompute));
}

steps::EstimateRequest parse_step_request(const StepFlags& flags) {
  const std::vector<MicroBatch> micro_batches = parse_micro_batches(flags.length, flags.documents);
  if (micro_batches.size() != 1)
    throw InputError("--seq", 0, "", "expected one sequence length, got " + flags.length);
  return {.tokens = micro_batches.front().tokens(),
          .degree = flags.degree,
          .batch = flags.batch,
          .micro_batches = flags.micro_batches,
          .documents = micro_batches.front().documents};
}

void refuse_with(const CLI::App& command, std::initializer_list<const char*> flags,
                 const std::string& instead, const std::string& why) {
  for (const char* flag : flags)
    if (command.count(flag) > 0)
      throw InputError(flag, 0, "", "expected no " + std::string(flag) + " with " + instead + ", " + why);
}

TraceFormatFlags add_trace_format_options(CLI::App& command, std::string& column, std::string& field) {
  return {command.add_option("--column", column, "CSV trace: the column holding the length")
              ->capture_default_str(),
          command.add_option("--field", field, "JSONL trace: the field holding the length")
              ->capture_default_str()};
}

void TraceFormatFlags::check(const std::string& trace) const {
  const std::string extension = std::filesystem::path(trace).extension().string();
  for (const auto& [option, format] : {std::pair{column, ".csv"}, {field, ".jsonl"}})
    if (option != nullptr && option->count() > 0 && extension != format)
      throw InputError(option->get_name(), 0, "",
                       "expected only with a " + std::string(format) +
                           " trace, which it reads, got the trace '" + trace + "'");
}

}  // namespace paradyse::cli
