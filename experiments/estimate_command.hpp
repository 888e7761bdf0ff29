#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse estimate`: analytic time and memory of one training iteration per strategy and length.
void add_estimate_command(CLI::App& app);

}  // namespace paradyse::cli
