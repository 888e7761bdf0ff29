#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse costmodel profile|fit|eval`: the paper's learned cost model, and its accuracy.
void add_costmodel_command(CLI::App& app);

}  // namespace paradyse::cli
