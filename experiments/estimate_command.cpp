#include "experiments/estimate_command.hpp"

#include <fmt/core.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "common/units.hpp"
#include "experiments/inputs.hpp"
#include "steps/estimate.hpp"
#include "steps/estimate_json.hpp"
#include "strategies/micro_batch.hpp"

namespace paradyse::cli {
namespace {

struct EstimateOptions {
  evaluation::MachineOptions machine;
  std::string strategies = "all";
  std::string lengths;
  std::string documents;  // one packed micro-batch instead of lengths
  int degree = 0;
  int64_t batch = 1;
  int64_t micro_batches = 1;
  std::string recompute = "none";
  bool json = false;
};

struct EstimateRow {
  const Strategy* strategy;
  int64_t tokens;
  std::optional<steps::Estimate> estimate;  // empty when the strategy cannot run the model
  std::string reason;
};

// The estimate's keys, with the strategy and whether it could run; why not, when it could not.
void to_json(nlohmann::json& j, const EstimateRow& row) {
  if (row.estimate)
    j = *row.estimate;
  else
    j = {{"reason", row.reason}};
  j["strategy"] = row.strategy->name();
  j["seq"] = row.tokens;
  j["supported"] = row.estimate.has_value();
}

void print_details(const steps::Estimate& e) {
  const auto ms = [](double s) { return fmt::format("{:10.2f} ms", s * 1e3); };
  const auto gib = [](double b) { return fmt::format("{:10.2f} GiB", b / kGiB); };
  fmt::print("time of one iteration\n");
  fmt::print("  forward (with the loss gradient)       {}\n", ms(e.time.forward_s));
  fmt::print("  backward                               {}\n", ms(e.time.backward_s));
  fmt::print("  optimizer step                         {}\n", ms(e.time.optimizer_s));
  fmt::print("  total                                  {}\n", ms(e.time.total_s));
  fmt::print("    compute stream busy                  {}\n", ms(e.time.compute_s));
  fmt::print("    exposed communication                {}\n", ms(e.time.exposed_communication_s));
  fmt::print("    waiting for the host to issue        {}\n", ms(e.time.host_bound_s));
  fmt::print("memory per GPU\n");
  fmt::print("  weights (bf16 shards)                  {}\n", gib(e.memory.weights_bytes));
  fmt::print("  gradients (fp32 main, shards)          {}\n", gib(e.memory.gradients_bytes));
  fmt::print("  optimizer states (fp32 Adam)           {}\n", gib(e.memory.optimizer_states_bytes));
  fmt::print("  saved activations, all layers          {}\n", gib(e.memory.saved_activations_bytes));
  fmt::print("  transient working set at the peak      {}\n", gib(e.memory.transient_bytes));
  fmt::print("  allocator fragmentation                {}\n", gib(e.memory.fragmentation_bytes));
  fmt::print("  peak                                   {}   of {:.2f} GiB usable: {}\n",
             gib(e.memory.peak_bytes), e.memory.capacity_bytes / kGiB, e.fits ? "fits" : "OUT OF MEMORY");
  if (e.memory.offloaded_bytes > 0)
    fmt::print("  offloaded to host memory at the peak   {}   of {:.2f} GiB the host gives a GPU\n",
               gib(e.memory.offloaded_bytes), e.memory.host_capacity_bytes / kGiB);
  fmt::print("work\n");
  fmt::print("  FLOPs executed, all GPUs               {:10.3f} PFLOP\n", e.flops / 1e15);
  fmt::print("  model FLOPs utilisation                {:10.1f} %\n", e.mfu * 100);
  fmt::print("  communication per GPU (bus bytes)      {:10.3f} GB\n", e.comm_bytes / 1e9);
}

void print_table(const std::vector<EstimateRow>& rows) {
  fmt::print("{:<12} {:>8} {:>11} {:>11} {:>11} {:>9} {:>5} {:>6} {:>9} {:>7}\n", "strategy", "seq",
             "forward_ms", "backward_ms", "total_ms", "peak_GiB", "fits", "MFU_%", "comm_GB", "host_%");
  for (const EstimateRow& row : rows) {
    if (!row.estimate) {
      fmt::print("{:<12} {:>8} {}\n", row.strategy->name(), row.tokens,
                 row.reason.starts_with("out of memory") ? row.reason : "unsupported: " + row.reason);
      continue;
    }
    const steps::Estimate& e = *row.estimate;
    fmt::print("{:<12} {:>8} {:>11.2f} {:>11.2f} {:>11.2f} {:>9.2f} {:>5} {:>6.1f} {:>9.3f} {:>7.1f}\n",
               row.strategy->name(), row.tokens, e.time.forward_s * 1e3, e.time.backward_s * 1e3,
               e.time.total_s * 1e3, e.memory.peak_bytes / kGiB, e.fits ? "yes" : "OOM", e.mfu * 100,
               e.comm_bytes / 1e9, 100 * e.time.host_bound_s / e.time.total_s);
  }
}

void run(const EstimateOptions& options) {
  // Validate every input before any work, so a bad flag leaves no partial output.
  // A packed micro-batch is one row per strategy, of its documents' total length.
  const std::vector<MicroBatch> micro_batches = parse_micro_batches(options.lengths, options.documents);
  const std::vector<const Strategy*> strategies =
      evaluation::parse_strategies(options.strategies, "--strategy");
  const Recompute recompute = evaluation::parse_recompute_flag(options.recompute);
  steps::Estimator estimator(options.machine.load_model(), options.machine.load_cluster());
  const int gpus = estimator.cluster().num_gpus();
  const int degree = options.degree == 0 ? gpus : options.degree;
  if (degree > gpus)
    throw InputError("--degree", 0, "",
                     "expected a degree between 1 and the " + std::to_string(gpus) + " GPUs of " +
                         estimator.cluster().name + ", got " + std::to_string(degree));
  if (auto why = none_can_run(estimator.model(), degree, strategies, gpus))
    throw InputError(strategies.size() == 1 ? "--strategy" : "--degree", 0, "", *why);
  const bool single = strategies.size() == 1 && micro_batches.size() == 1;

  std::vector<EstimateRow> rows;
  for (const Strategy* strategy : strategies) {
    // In a list of which some run, one that cannot is a row that says why.
    const auto why = estimator.unsupported(*strategy, degree);
    for (const MicroBatch& micro_batch : micro_batches) {
      const int64_t tokens = micro_batch.tokens();
      if (why) {
        rows.push_back({strategy, tokens, std::nullopt, *why});
        continue;
      }
      try {
        rows.push_back({strategy, tokens,
                        estimator.estimate(*strategy,
                                           {.tokens = tokens,
                                            .degree = degree,
                                            .batch = options.batch,
                                            .micro_batches = options.micro_batches,
                                            .documents = micro_batch.documents},
                                           recompute),
                        ""});
      } catch (const TensorTooLarge& e) {
        if (single) throw;
        rows.push_back({strategy, tokens, std::nullopt, e.message()});
      }
    }
  }

  if (options.json) {
    const nlohmann::json out = rows;
    std::cout << (single ? out[0] : out).dump(2) << "\n";
    return;
  }
  const ModelSpec& model = estimator.model();
  const hw::ClusterSpec& cluster = estimator.cluster();
  fmt::print(
      "{} (h {}, {} heads, {} KV heads, {} layers, {}, {} attention, {} loss) on {} ({} GPUs of {}, "
      "framework {}), degree {}, batch {}{}, recompute {}\n",
      model.name, model.hidden, model.heads, model.kv_heads, model.num_layers,
      model.causal ? "causal" : "bidirectional", to_string(model.attention_kernel),
      to_string(model.loss_kernel), cluster.name, cluster.num_gpus(), cluster.gpu.name,
      framework_text(cluster), degree, options.batch,
      options.micro_batches > 1 ? fmt::format(" × {} micro-batches", options.micro_batches) : "",
      options.recompute);
  if (single && rows[0].estimate) {
    const steps::Estimate& e = *rows[0].estimate;
    fmt::print("{}, seq {}{}{}\n", e.plan, e.tokens,
               e.documents > 1 ? fmt::format(" in {} packed documents", e.documents) : "",
               e.padded_tokens != e.tokens ? fmt::format(" (padded to {})", e.padded_tokens) : "");
    print_details(e);
    return;
  }
  print_table(rows);
}

}  // namespace

void add_estimate_command(CLI::App& app) {
  auto options = std::make_shared<EstimateOptions>();
  CLI::App* command = app.add_subcommand(
      "estimate",
      "Analytic time and peak memory of one training iteration (one micro-batch of B sequences of N tokens "
      "on P GPUs, or a global batch of several, then the optimizer step) for each strategy and length. "
      "Lengths are padded up to a multiple of P "
      "(2P for causal models, whose ranks hold two zig-zag chunks); padding is reported.");
  add_machine_options(*command, options->machine);
  command
      ->add_option("--strategy", options->strategies,
                   "strategy name, comma-separated names, or 'all' (" + strategy_names() + ")")
      ->capture_default_str();
  command->add_option("--seq", options->lengths,
                      "sequence length(s) in tokens: 4096, 16K, 1M; comma-separated");
  add_documents_option(*command, options->documents);
  add_degree_and_batch_options(*command, options->degree, options->batch);
  add_micro_batches_option(*command, options->micro_batches);
  add_recompute_option(*command, options->recompute);
  command->add_flag("--json", options->json, "print JSON instead of a table");
  command->callback([options] { run(*options); });
}

}  // namespace paradyse::cli
