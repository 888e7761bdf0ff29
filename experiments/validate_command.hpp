#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse validate`: run a plan for real, simulate it on the calibrated machine, print the error.
void add_validate_command(CLI::App& app);

}  // namespace paradyse::cli
