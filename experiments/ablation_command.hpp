#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse ablation`: the paper's Table 5 on a trace.
void add_ablation_command(CLI::App& app);

}  // namespace paradyse::cli
