// The paradyse command: one subcommand per question a user asks (see --help). The commands that need
// the simulator or the real backend run in paradyse-sim and paradyse-real (command_table.hpp).
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "common/heap.hpp"
#include "common/printable_text.hpp"
#include "experiments/bench_command.hpp"
#include "experiments/command_line.hpp"
#include "experiments/command_table.hpp"
#include "experiments/estimate_command.hpp"
#include "experiments/export_command.hpp"
#include "experiments/plan_command.hpp"
#include "experiments/published_command.hpp"
#include "experiments/trace_command.hpp"

int main(int argc, char** argv) {
  paradyse::keep_freed_heap();
  try {
    paradyse::cli::hand_over(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "paradyse: error: {}\n", paradyse::printable_text(e.what()));
    return 2;
  }
  CLI::App app{
      "paradyse: choose, per input sequence and per layer, the fastest parallel strategy that fits in GPU "
      "memory, for training Transformers on inputs of wildly varying length."};
  app.require_subcommand(1);
  paradyse::cli::list_handed_over_commands(app);
  paradyse::cli::add_trace_command(app);
  paradyse::cli::add_estimate_command(app);
  paradyse::cli::add_plan_command(app);
  paradyse::cli::add_export_command(app);
  paradyse::cli::add_published_command(app);
  paradyse::cli::add_bench_command(app);
  paradyse::cli::add_bench_plan_command(app);
  return paradyse::cli::run_command_line(app, argc, argv);
}
