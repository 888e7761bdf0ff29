#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse sweep`: a compare run at every point of a grid of cluster and model variations.
void add_sweep_command(CLI::App& app);

}  // namespace paradyse::cli
