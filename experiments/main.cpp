// The paradyse command: one subcommand per question a user asks (see --help).
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "common/errors.hpp"
#include "experiments/ablation_command.hpp"
#include "experiments/bench_command.hpp"
#include "experiments/compare_command.hpp"
#include "experiments/costmodel_command.hpp"
#include "experiments/estimate_command.hpp"
#include "experiments/plan_command.hpp"
#include "experiments/run_command.hpp"
#include "experiments/simulate_command.hpp"
#include "experiments/sweep_command.hpp"
#include "experiments/trace_command.hpp"
#include "experiments/validate_command.hpp"
#include "real_backend/communication_error.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "paradyse: choose, per input sequence and per layer, the fastest parallel strategy that fits in GPU "
      "memory, for training Transformers on inputs of wildly varying length."};
  app.require_subcommand(1);
  paradyse::cli::add_compare_command(app);
  paradyse::cli::add_ablation_command(app);
  paradyse::cli::add_sweep_command(app);
  paradyse::cli::add_trace_command(app);
  paradyse::cli::add_estimate_command(app);
  paradyse::cli::add_simulate_command(app);
  paradyse::cli::add_plan_command(app);
  paradyse::cli::add_run_command(app);
  paradyse::cli::add_calibrate_command(app);
  paradyse::cli::add_validate_command(app);
  paradyse::cli::add_costmodel_command(app);
  paradyse::cli::add_bench_command(app);
  paradyse::cli::add_bench_simulate_command(app);
  paradyse::cli::add_bench_plan_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const paradyse::InputError& e) {
    fmt::print(stderr, "paradyse: error: {}\n", e.what());
    return 2;
  } catch (const paradyse::real::CommunicationError& e) {
    fmt::print(stderr, "paradyse: error: {}\n", e.what());
    return 4;
  } catch (const std::exception& e) {
    // The first line: LibTorch's errors go on with a stack trace nobody running paradyse needs.
    const std::string what = e.what();
    fmt::print(stderr, "paradyse: internal error: {}\n", what.substr(0, what.find('\n')));
    return 3;
  }
  return 0;
}
