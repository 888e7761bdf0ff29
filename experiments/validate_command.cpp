#include "experiments/validate_command.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/errors.hpp"
#include "common/statistics.hpp"
#include "common/units.hpp"
#include "experiments/command_table.hpp"
#include "experiments/inputs.hpp"
#include "experiments/real_options.hpp"
#include "sim/simulator.hpp"

namespace paradyse::cli {
namespace {

struct CalibrateOptions {
  int ranks = 2;
  std::string model = "tiny-gpt";
  std::string dtype = "bf16";
  std::string out = "local-cpu.json";
  int timeout_s = 120;
};

void calibrate(const CalibrateOptions& options) {
  if (options.ranks < 1)
    throw InputError("--ranks", 0, "", "expected a positive number, got " + std::to_string(options.ranks));
  const ModelSpec model = load_model(options.model);
  on_every_rank(options.ranks, options.timeout_s, [&](const real::RankEnvironment& env) {
    const auto json =
        real::calibrate_on_rank(env, model, options.dtype == "bf16", std::chrono::seconds(options.timeout_s));
    if (!json) return;
    write_file_atomically(options.out, [&](std::ostream& out) { out << *json << "\n"; });
    const hw::ClusterSpec cluster = hw::load_cluster(options.out);  // what validate will read
    fmt::print("wrote {}: {} ranks, GEMM peak {:.1f} GFLOP/s, copy {:.1f} GB/s, all-reduce bus {:.2f} GB/s\n",
               options.out, cluster.gpus_per_node, cluster.gpu.bf16_flops_per_second / 1e9,
               cluster.gpu.hbm_bytes_per_second / 1e9, cluster.intra_node.peak_bus_bandwidth() / 1e9);
  });
}

struct ValidateOptions {
  RealRunOptions real;
  std::string cluster = "local-cpu.json";
  bool json = false;
};

double relative_error(double simulated, double measured) {
  return (simulated - measured) / measured;
}

// One plan at one length: measured against simulated, each error relative to the measurement.
struct Row {
  std::string plan;
  int64_t seq = 0;
  double measured_s = 0, simulated_s = 0, time_error = 0;
  double measured_peak_bytes = 0, simulated_peak_bytes = 0, memory_error = 0;

  Row() = default;
  Row(std::string plan_name, int64_t tokens, double measured_s, double simulated_s, double measured_bytes,
      double simulated_bytes)
      : plan(std::move(plan_name)),
        seq(tokens),
        measured_s(measured_s),
        simulated_s(simulated_s),
        time_error(relative_error(simulated_s, measured_s)),
        measured_peak_bytes(measured_bytes),
        simulated_peak_bytes(simulated_bytes),
        memory_error(relative_error(simulated_bytes, measured_bytes)) {}
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Row, plan, seq, measured_s, simulated_s, time_error, measured_peak_bytes,
                                   simulated_peak_bytes, memory_error)

void print_rows(const std::vector<Row>& rows, const ValidateOptions& options, const std::string& model) {
  fmt::print("{} on {} ranks of this machine, simulated on {}\n", model, options.real.ranks, options.cluster);
  fmt::print("{:<12} {:>7}  {:>11} {:>11} {:>8}  {:>12} {:>12} {:>8}\n", "plan", "seq", "measured",
             "simulated", "error", "measured", "simulated", "error");
  for (const Row& r : rows)
    fmt::print("{:<12} {:>7}  {:>9.4f} s {:>9.4f} s {:>+7.1f}%  {:>8.2f} MiB {:>8.2f} MiB {:>+7.1f}%\n",
               r.plan, r.seq, r.measured_s, r.simulated_s, 100 * r.time_error, r.measured_peak_bytes / kMiB,
               r.simulated_peak_bytes / kMiB, 100 * r.memory_error);
  PercentageErrors time_errors, memory_errors;
  for (const Row& r : rows) {
    time_errors.add(r.simulated_s, r.measured_s);
    memory_errors.add(r.simulated_peak_bytes, r.measured_peak_bytes);
  }
  fmt::print("mean |error|: time {:.1f}%, memory {:.1f}%\n", time_errors.mean_pct(),
             memory_errors.mean_pct());
}

void validate(const ValidateOptions& options) {
  const ModelSpec model = options.real.load_model();
  if (!std::filesystem::exists(options.cluster))
    throw InputError(options.cluster, 0, "",
                     "no such cluster file: measure this machine first with `paradyse calibrate --ranks " +
                         std::to_string(options.real.ranks) + " --out " + options.cluster + "`");
  const hw::ClusterSpec cluster = hw::load_cluster(options.cluster);
  if (cluster.num_gpus() < options.real.ranks)
    throw InputError(options.cluster, 0, "gpus_per_node",
                     "expected at least --ranks = " + std::to_string(options.real.ranks) + " ranks, got " +
                         std::to_string(cluster.num_gpus()) +
                         " (calibrate with as many ranks as you validate on)");
  std::vector<real::RunRequest> requests;
  if (options.real.plan != "all") requests.push_back(options.real.request(model));
  RealRunOptions one = options.real;
  for (const Strategy* strategy :
       options.real.plan == "all" ? all_strategies() : std::vector<const Strategy*>{})
    if (!strategy->unsupported(model, options.real.ranks)) {  // "all": each strategy that can run here
      one.plan = std::string(strategy->name());
      requests.push_back(one.request(model));
    }
  if (requests.empty())
    throw InputError(
        "--plan", 0, "",
        "no strategy can run " + model.name + " on " + std::to_string(options.real.ranks) + " ranks");

  on_every_rank(options.real.ranks, options.real.timeout_s, [&](const real::RankEnvironment& env) {
    const std::vector<real::RunReport> reports = real::run_training(env, requests);
    if (reports.empty()) return;
    sim::Simulator simulator(model, cluster);
    std::vector<Row> rows;
    for (std::size_t i = 0; i < requests.size(); ++i)
      for (const real::LengthMeasurement& m : reports[i].lengths) {
        const sim::SimulationResult s =
            simulator.simulate(requests[i].plan, {m.seq, options.real.ranks, requests[i].batch});
        rows.emplace_back(plan_name(requests[i].plan), m.seq, m.median_step_s, s.iteration_time_s,
                          static_cast<double>(m.peak_bytes), s.peak_memory_bytes);
      }
    if (!options.json) return print_rows(rows, options, model.name);
    std::cout << nlohmann::json(rows).dump(2) << "\n";
  });
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto options = std::make_shared<CalibrateOptions>();
  CLI::App* command = app.add_subcommand("calibrate", command_description("calibrate"));
  command->add_option("--ranks", options->ranks, "processes to measure with (as validate will run)")
      ->capture_default_str();
  command->add_option("--model", options->model, "model whose head size attention is timed at")
      ->capture_default_str();
  command->add_option("--dtype", options->dtype, "element type GEMMs and attention are timed in")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  command->add_option("--out", options->out, "cluster file to write")->capture_default_str();
  command->add_option("--timeout", options->timeout_s, "seconds a rank waits for a peer")
      ->capture_default_str();
  command->callback([options] { calibrate(*options); });
}

void add_validate_command(CLI::App& app) {
  auto options = std::make_shared<ValidateOptions>();
  CLI::App* command = app.add_subcommand("validate", command_description("validate"));
  options->real.add_to(*command);
  command->add_option("--cluster", options->cluster, "the calibrated cluster file of this machine")
      ->capture_default_str();
  command->add_flag("--json", options->json, "print JSON instead of a table");
  command->callback([options] { validate(*options); });
}

}  // namespace paradyse::cli
