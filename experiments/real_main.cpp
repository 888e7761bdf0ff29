// paradyse-real: the commands that run strategies on real tensors (LibTorch, Gloo or NCCL). Users
// call them through `paradyse`, which starts this executable (command_table.hpp).
#include <CLI/CLI.hpp>

#include "common/errors.hpp"
#include "experiments/calibrate_command.hpp"
#include "experiments/command_line.hpp"
#include "experiments/command_table.hpp"
#include "experiments/run_command.hpp"
#ifdef PARADYSE_WITH_VALIDATE
#include "experiments/validate_command.hpp"
#endif

int main(int argc, char** argv) {
  CLI::App app{"paradyse (real backend): training steps on real tensors, calibration and validation."};
  app.name("paradyse");  // usage lines read as the command users typed
  app.require_subcommand(1);
  paradyse::cli::add_run_command(app);
  paradyse::cli::add_calibrate_command(app);
#ifdef PARADYSE_WITH_VALIDATE
  paradyse::cli::add_validate_command(app);
#else
  app.add_subcommand("validate", paradyse::cli::command_description("validate"))
      ->allow_extras()
      ->callback([] {
        throw paradyse::InputError("", 0, "",
                                   "validate compares real steps with the simulator, and this paradyse-real "
                                   "was built without SimGrid: install libsimgrid-dev and configure again");
      });
#endif
  return paradyse::cli::run_command_line(app, argc, argv);
}
