#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse bench`: how long the analytic estimate takes, cold (trace + price) and cached.
void add_bench_command(CLI::App& app);

}  // namespace paradyse::cli
