#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse compare`: every policy over a dataset's real length trace, with report and plots.
void add_compare_command(CLI::App& app);

}  // namespace paradyse::cli
