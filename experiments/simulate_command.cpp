#include "experiments/simulate_command.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/units.hpp"
#include "experiments/command_table.hpp"
#include "experiments/inputs.hpp"
#include "experiments/progress_bar.hpp"
#include "sim/result_json.hpp"
#include "sim/simulator.hpp"
#include "sim/timeline_json.hpp"
#include "strategies/micro_batch.hpp"

namespace paradyse::cli {
namespace {

struct SimulateOptions {
  evaluation::MachineOptions machine;
  std::string plan;
  std::string length;
  std::string documents;  // one packed micro-batch instead of length
  int degree = 0;
  int64_t batch = 1;
  int64_t micro_batches = 1;
  std::string recompute = "none";
  double oversubscription = 1;
  std::string timeline;
  bool json = false;
};

std::string where(const sim::OutOfMemory& oom) {
  std::string text = "rank " + std::to_string(oom.rank) + ", ";
  if (oom.layer >= 0) text += "layer " + std::to_string(oom.layer) + " ";
  return text + std::string(to_string(oom.phase)) + ", before " + oom.op;
}

void print(const sim::SimulationResult& r, const sim::Simulator& simulator,
           const sim::SimulationOptions& options) {
  const ModelSpec& model = simulator.model();
  const hw::ClusterSpec& cluster = simulator.cluster();
  fmt::print("{} ({} layers, {}, {} attention, {} loss) on {} ({} GPUs of {}), degree {}, batch {}{}\n",
             model.name, model.num_layers, model.causal ? "causal" : "bidirectional",
             to_string(model.attention_kernel), to_string(model.loss_kernel), cluster.name,
             cluster.num_gpus(), cluster.gpu.name, r.degree, r.batch,
             r.micro_batches > 1 ? fmt::format(" × {} micro-batches", r.micro_batches) : "");
  fmt::print("plan {}, seq {}{}{}\n", r.plan, r.tokens,
             r.documents > 1 ? fmt::format(" in {} packed documents", r.documents) : "",
             r.padded_tokens != r.tokens ? fmt::format(" (padded to {})", r.padded_tokens) : "");
  fmt::print("iteration time            {:12.2f} ms\n", r.iteration_time_s * 1e3);
  fmt::print("peak memory per GPU       {:12.2f} GiB of {:.2f} GiB usable: {}\n", r.peak_memory_bytes / kGiB,
             r.capacity_bytes / kGiB, r.oom ? "OUT OF MEMORY" : "fits");
  if (r.oom_at)
    fmt::print("  first out of memory at  {} ({:.2f} GiB)\n", where(*r.oom_at), r.oom_at->bytes / kGiB);
  fmt::print("{:>6} {:>12} {:>16} {:>10} {:>10}\n", "rank", "compute_ms", "exposed_comm_ms", "idle_ms",
             "peak_GiB");
  for (std::size_t i = 0; i < r.per_rank.size(); ++i) {
    const sim::RankResult& rank = r.per_rank[i];
    fmt::print("{:>6} {:>12.2f} {:>16.2f} {:>10.2f} {:>10.2f}\n", i, rank.compute_s * 1e3,
               rank.exposed_comm_s * 1e3, rank.idle_s * 1e3, rank.peak_memory_bytes / kGiB);
  }
  fmt::print("simulated activities      {} ({} kernels, {} network flows, {} analytic collectives)\n",
             r.events(), r.kernels, r.flows, r.analytic_collectives);
  fmt::print("collectives               {}\n", sim::collective_algorithm_description(options));
}

// Writes through a temporary file so that a failure leaves nothing behind.
void write_timeline_file(const sim::SimulationResult& result, const std::string& path) {
  write_file_atomically(path, [&](std::ostream& out) { sim::write_timeline(result, out); });
}

void run(const SimulateOptions& options) {
  // Every input is checked before anything is simulated or written.
  const std::vector<MicroBatch> micro_batches = parse_micro_batches(options.length, options.documents);
  if (micro_batches.size() != 1)
    throw InputError("--seq", 0, "", "expected one sequence length, got " + options.length);
  const ModelSpec model = options.machine.load_model();
  const Plan plan =
      evaluation::parse_plan(options.plan, model, evaluation::parse_recompute_flag(options.recompute));
  if (!options.timeline.empty()) check_output_path(options.timeline, OutputKind::file, "--timeline");
  // A large job takes minutes to trace and simulate: a progress bar on a terminal's stderr after two
  // seconds (never on stdout, so --json and the table stay clean).
  ProgressBar bar(isatty(STDERR_FILENO) != 0);
  sim::SimulationOptions sim_options;
  sim_options.record_timeline = !options.timeline.empty();
  sim_options.progress = [&bar](std::string_view phase, uint64_t done, uint64_t total) {
    bar.update(static_cast<int64_t>(done), static_cast<int64_t>(total), std::string(phase));
  };
  hw::ClusterSpec cluster = options.machine.load_cluster();
  cluster.spine_oversubscription = options.oversubscription;
  sim::Simulator simulator(model, std::move(cluster), sim_options);
  sim::SimulationResult result;
  try {
    result = simulator.simulate(plan, {.tokens = micro_batches.front().tokens(),
                                       .degree = options.degree,
                                       .batch = options.batch,
                                       .micro_batches = options.micro_batches,
                                       .documents = micro_batches.front().documents});
  } catch (...) {
    bar.finish();  // the error goes on a line of its own
    throw;
  }
  bar.finish();
  if (!options.timeline.empty()) write_timeline_file(result, options.timeline);
  if (options.json) {
    nlohmann::json j = result;
    j["collective_algorithm"] = sim::collective_algorithm_description(sim_options);
    std::cout << j.dump(2) << "\n";
  } else {
    print(result, simulator, sim_options);
  }
}

struct BenchSimulateOptions {
  evaluation::MachineOptions machine;
  std::string strategies = "all";
  std::string length = "128K";
  int repeat = 5;
};

void bench(const BenchSimulateOptions& options) {
  const std::vector<int64_t> lengths = evaluation::parse_lengths(options.length, "--seq");
  const std::vector<const Strategy*> strategies =
      evaluation::parse_strategies(options.strategies, "--strategy");
  if (options.repeat < 1) throw InputError("--repeat", 0, "", "expected a positive count");
  sim::Simulator simulator(options.machine.load_model(), options.machine.load_cluster());
  const ModelSpec& model = simulator.model();
  using Clock = std::chrono::steady_clock;
  fmt::print("wall time to trace and simulate one iteration of {} on {}: median of {} runs\n", model.name,
             simulator.cluster().name, options.repeat);
  fmt::print("{:<12} {:>8} {:>10} {:>12} {:>16}\n", "strategy", "seq", "wall_ms", "activities",
             "activities_per_s");
  double slowest = 0;
  for (const Strategy* strategy : strategies) {
    if (strategy->unsupported(model, simulator.cluster().num_gpus())) continue;
    for (int64_t tokens : lengths) {
      std::vector<double> wall;
      uint64_t events = 0;
      for (int i = 0; i < options.repeat; ++i) {
        const auto start = Clock::now();
        events = simulator.simulate(uniform_plan(*strategy, model.num_layers), {.tokens = tokens}).events();
        wall.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      }
      std::sort(wall.begin(), wall.end());
      const double median = wall[wall.size() / 2];
      slowest = std::max(slowest, median);
      fmt::print("{:<12} {:>8} {:>10.1f} {:>12} {:>16.0f}\n", strategy->name(), tokens, median * 1e3, events,
                 static_cast<double>(events) / median);
    }
  }
  fmt::print("slowest strategy: {:.1f} ms per iteration\n", slowest * 1e3);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto options = std::make_shared<SimulateOptions>();
  CLI::App* command = app.add_subcommand("simulate", command_description("simulate"));
  add_machine_options(*command, options->machine);
  command
      ->add_option(
          "--plan", options->plan,
          "one strategy for every layer, or a comma-separated strategy per layer (" + strategy_names() + ")")
      ->required();
  command->add_option("--seq", options->length, "sequence length in tokens: 4096, 16K, 1M");
  add_documents_option(*command, options->documents);
  add_degree_and_batch_options(*command, options->degree, options->batch);
  add_micro_batches_option(*command, options->micro_batches);
  command->add_option("--recompute", options->recompute, "activation recomputation: none, selective or full")
      ->capture_default_str();
  command
      ->add_option("--oversubscription", options->oversubscription,
                   "fat-tree oversubscription between nodes (1: non-blocking)")
      ->capture_default_str();
  command->add_option("--timeline", options->timeline,
                      "write a Chrome/Perfetto trace-event JSON of every rank's streams to this file");
  command->add_flag("--json", options->json, "print JSON instead of a table");
  command->callback([options] { run(*options); });
}

void add_bench_simulate_command(CLI::App& app) {
  auto options = std::make_shared<BenchSimulateOptions>();
  CLI::App* command = app.add_subcommand("bench-simulate", command_description("bench-simulate"));
  add_machine_options(*command, options->machine);
  command->add_option("--strategy", options->strategies, "strategy name(s) or 'all'")->capture_default_str();
  command->add_option("--seq", options->length, "sequence length(s), comma-separated")->capture_default_str();
  command->add_option("--repeat", options->repeat, "runs per row")->capture_default_str();
  command->callback([options] { bench(*options); });
}

}  // namespace paradyse::cli
