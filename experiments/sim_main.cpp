// paradyse-sim: the commands that run the simulator (SimGrid). Users call them through `paradyse`,
// which starts this executable (command_table.hpp).
#include <CLI/CLI.hpp>

#include "common/heap.hpp"
#include "experiments/ablation_command.hpp"
#include "experiments/bench_compare_command.hpp"
#include "experiments/bench_groups_command.hpp"
#include "experiments/bench_memory_command.hpp"
#include "experiments/command_line.hpp"
#include "experiments/compare_command.hpp"
#include "experiments/costmodel_command.hpp"
#include "experiments/simulate_command.hpp"
#include "experiments/sweep_command.hpp"

int main(int argc, char** argv) {
  paradyse::keep_freed_heap();
  CLI::App app{"paradyse (simulator): policies over traces, sweeps, simulation, the learned cost model."};
  app.name("paradyse");  // usage lines read as the command users typed
  app.require_subcommand(1);
  paradyse::cli::add_compare_command(app);
  paradyse::cli::add_ablation_command(app);
  paradyse::cli::add_sweep_command(app);
  paradyse::cli::add_simulate_command(app);
  paradyse::cli::add_bench_simulate_command(app);
  paradyse::cli::add_bench_compare_command(app);
  paradyse::cli::add_bench_groups_command(app);
  paradyse::cli::add_bench_memory_command(app);
  paradyse::cli::add_costmodel_command(app);
  return paradyse::cli::run_command_line(app, argc, argv);
}
