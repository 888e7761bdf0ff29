#include "experiments/simulate_command.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "chakra/import.hpp"
#include "common/atomic_file.hpp"
#include "common/units.hpp"
#include "experiments/command_table.hpp"
#include "experiments/inputs.hpp"
#include "experiments/progress_bar.hpp"
#include "sim/result_json.hpp"
#include "sim/timeline_json.hpp"
#include "steps/step_simulator.hpp"
#include "strategies/micro_batch.hpp"

namespace paradyse::cli {
namespace {

struct SimulateOptions {
  evaluation::MachineOptions machine;
  StepFlags step;
  double oversubscription = 1;
  int max_flows_per_collective = sim::SimulationOptions{}.max_flows_per_collective;
  std::string timeline;
  bool json = false;
  std::string chakra;  // run these Chakra traces instead of a plan
  std::string comm_group_file;
  bool price_compute = false;
};

std::string where(const sim::OutOfMemory& oom) {
  std::string text = "rank " + std::to_string(oom.rank) + ", ";
  if (oom.layer >= 0) text += "layer " + std::to_string(oom.layer) + " ";
  return text + std::string(to_string(oom.phase)) + ", before " + oom.op;
}

// What was simulated, for the table's first lines.
std::string plan_header(const sim::SimulationResult& r, const steps::StepSimulator& simulator) {
  const ModelSpec& model = simulator.model();
  const hw::ClusterSpec& cluster = simulator.cluster();
  return fmt::format(
             "{} ({} layers, {}, {} attention, {} loss) on {} ({} GPUs of {}, framework {}), degree {}, "
             "batch {}{}\n",
             model.name, model.num_layers, model.causal ? "causal" : "bidirectional",
             to_string(model.attention_kernel), to_string(model.loss_kernel), cluster.name,
             cluster.num_gpus(), cluster.gpu.name, framework_text(cluster), r.degree, r.batch,
             r.micro_batches > 1 ? fmt::format(" × {} micro-batches", r.micro_batches) : "") +
         fmt::format("plan {}, seq {}{}{}\n", r.plan, r.tokens,
                     r.documents > 1 ? fmt::format(" in {} packed documents", r.documents) : "",
                     r.padded_tokens != r.tokens ? fmt::format(" (padded to {})", r.padded_tokens) : "");
}

void print(const std::string& header, const sim::SimulationResult& r, const sim::SimulationOptions& options) {
  fmt::print("{}", header);
  fmt::print("iteration time            {:12.2f} ms\n", r.iteration_time_s * 1e3);
  fmt::print("peak memory per GPU       {:12.2f} GiB of {:.2f} GiB usable: {}\n", r.peak_memory_bytes / kGiB,
             r.capacity_bytes / kGiB, r.oom ? "OUT OF MEMORY" : "fits");
  if (r.host_peak_bytes > 0)
    fmt::print("offloaded to host memory  {:12.2f} GiB per GPU at the peak\n", r.host_peak_bytes / kGiB);
  if (r.oom_at)
    fmt::print("  first out of memory at  {} ({:.2f} GiB)\n", where(*r.oom_at), r.oom_at->bytes / kGiB);
  fmt::print("{:>6} {:>12} {:>16} {:>14} {:>10} {:>10}\n", "rank", "compute_ms", "exposed_comm_ms",
             "host_bound_ms", "idle_ms", "peak_GiB");
  for (std::size_t i = 0; i < r.per_rank.size(); ++i) {
    const sim::RankResult& rank = r.per_rank[i];
    fmt::print("{:>6} {:>12.2f} {:>16.2f} {:>14.2f} {:>10.2f} {:>10.2f}\n", i, rank.compute_s * 1e3,
               rank.exposed_comm_s * 1e3, rank.host_bound_s * 1e3, rank.idle_s * 1e3,
               rank.peak_memory_bytes / kGiB);
  }
  if (r.iteration_time_s > 0)
    fmt::print(
        "host-bound                {:12.1f} % of the iteration (mean over ranks): the GPU waiting for "
        "the framework to issue its next op\n",
        100 * r.mean_host_bound_s() / r.iteration_time_s);
  fmt::print("simulated activities      {} ({} kernels, {} network flows, {} analytic collectives)\n",
             r.events(), r.kernels, r.flows, r.analytic_collectives);
  fmt::print("collectives               {}\n", sim::collective_algorithm_description(options));
}

// Writes through a temporary file so that a failure leaves nothing behind.
void write_timeline_file(const sim::SimulationResult& result, const std::string& path) {
  write_file_atomically(path, [&](std::ostream& out) { sim::write_timeline(result, out); });
}

// Writes the timeline, then prints the result as JSON or a table.
void report(const sim::SimulationResult& result, const SimulateOptions& options,
            const sim::SimulationOptions& sim_options, const std::string& header) {
  if (!options.timeline.empty()) write_timeline_file(result, options.timeline);
  if (options.json) {
    nlohmann::json j = result;
    j["collective_algorithm"] = sim::collective_algorithm_description(sim_options);
    std::cout << j.dump(2) << "\n";
  } else {
    print(header, result, sim_options);
  }
}

// --chakra: every rank's trace run on the cluster (chakra/import.hpp).
void run_chakra(const SimulateOptions& options, const CLI::App& command) {
  refuse_with(command, {"--plan", "--seq", "--docs", "--degree", "--batch", "--micro-batches", "--recompute"},
              "--chakra", "whose traces are the step");
  if (!options.timeline.empty()) check_output_path(options.timeline, OutputKind::file, "--timeline");
  const std::string comm_group_file =
      options.comm_group_file.empty() ? options.chakra + ".comm_groups.json" : options.comm_group_file;
  chakra::ImportedJob job =
      chakra::read_chakra_traces(options.chakra, comm_group_file, {.price_compute = options.price_compute});
  sim::SimulationOptions sim_options;
  sim_options.record_timeline = !options.timeline.empty();
  sim_options.max_flows_per_collective = options.max_flows_per_collective;
  hw::ClusterSpec cluster = options.machine.load_cluster();
  cluster.spine_oversubscription = options.oversubscription;
  sim::Simulator simulator(std::move(cluster), sim_options);
  sim::SimulationResult result = simulator.run(std::move(job.programs), job.static_bytes);
  result.plan = "chakra:" + options.chakra;
  const hw::ClusterSpec& on = simulator.cluster();
  const std::string header = fmt::format(
      "Chakra traces {} ({} ranks{}) on {} ({} GPUs of {}), compute nodes {}\n", options.chakra,
      job.files.size(), job.description.empty() ? "" : ": " + job.description, on.name, on.num_gpus(),
      on.gpu.name, options.price_compute ? "priced on the cluster" : "at their recorded durations");
  report(result, options, sim_options, header);
}

void run(const SimulateOptions& options, const CLI::App& command) {
  if (!options.chakra.empty()) return run_chakra(options, command);
  if (options.step.plan.empty())
    throw InputError("--plan", 0, "", "expected a plan to simulate (or --chakra, traces to run)");
  if (command.count("--comm-group-file") > 0 || options.price_compute)
    throw InputError(options.price_compute ? "--price-compute" : "--comm-group-file", 0, "",
                     "expected it only with --chakra");
  // Every input is checked before anything is simulated or written.
  const steps::EstimateRequest request = parse_step_request(options.step);
  const ModelSpec model = options.machine.load_model();
  const Plan plan = parse_step_plan(options.step, model);
  if (!options.timeline.empty()) check_output_path(options.timeline, OutputKind::file, "--timeline");
  // A large job takes minutes to trace and simulate: a progress bar on a terminal's stderr after two
  // seconds (never on stdout, so --json and the table stay clean).
  ProgressBar bar(isatty(STDERR_FILENO) != 0);
  sim::SimulationOptions sim_options;
  sim_options.record_timeline = !options.timeline.empty();
  sim_options.max_flows_per_collective = options.max_flows_per_collective;
  sim_options.progress = [&bar](std::string_view phase, uint64_t done, uint64_t total) {
    bar.update(static_cast<int64_t>(done), static_cast<int64_t>(total), std::string(phase));
  };
  hw::ClusterSpec cluster = options.machine.load_cluster();
  cluster.spine_oversubscription = options.oversubscription;
  steps::StepSimulator simulator(model, std::move(cluster), sim_options);
  sim::SimulationResult result;
  try {
    result = simulator.simulate(plan, request);
  } catch (...) {
    bar.finish();  // the error goes on a line of its own
    throw;
  }
  bar.finish();
  report(result, options, sim_options, plan_header(result, simulator));
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
  steps::StepSimulator simulator(options.machine.load_model(), options.machine.load_cluster());
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
  add_step_flags(
      *command, options->step,
      "one strategy for every layer, or a comma-separated strategy per layer (" + strategy_names() + ")");
  command
      ->add_option("--oversubscription", options->oversubscription,
                   "fat-tree oversubscription between nodes (1: non-blocking)")
      ->capture_default_str();
  add_max_flows_option(*command, options->max_flows_per_collective);
  command->add_option("--timeline", options->timeline,
                      "write a Chrome/Perfetto trace-event JSON of every rank's streams to this file");
  command->add_flag("--json", options->json, "print JSON instead of a table");
  command->add_option(
      "--chakra", options->chakra,
      "instead of --plan: run MLCommons Chakra execution traces, <prefix>.<rank>.et for ranks 0, "
      "1, ... (as `paradyse export` writes them, or another tool), on the cluster (docs/chakra.md)");
  command->add_option("--comm-group-file", options->comm_group_file,
                      "with --chakra: the communicator groups, {\"<pg_name>\": [ranks...]} (default: "
                      "<prefix>.comm_groups.json)");
  command->add_flag(
      "--price-compute", options->price_compute,
      "with --chakra: price compute nodes on the cluster's GPU (by their op and shape, or as a GEMM "
      "of their FLOPs against their bytes) instead of taking their recorded durations");
  command->callback([options, command] { run(*options, *command); });
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
