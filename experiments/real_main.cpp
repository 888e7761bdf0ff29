// paradyse-real: the commands that run strategies on real tensors (LibTorch, Gloo or NCCL). Users
// call them through `paradyse`, which starts this executable (command_table.hpp).
#include <CLI/CLI.hpp>

#include "experiments/command_line.hpp"
#include "experiments/run_command.hpp"
#include "experiments/validate_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"paradyse (real backend): training steps on real tensors, calibration and validation."};
  app.name("paradyse");  // usage lines read as the command users typed
  app.require_subcommand(1);
  paradyse::cli::add_run_command(app);
  paradyse::cli::add_calibrate_command(app);
  paradyse::cli::add_validate_command(app);
  return paradyse::cli::run_command_line(app, argc, argv);
}
