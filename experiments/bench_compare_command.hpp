// `paradyse bench-compare`: the main job's wall time with its simulations in several processes and in
// one, their ratio, and whether the two wrote the same outputs.
#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {
void add_bench_compare_command(CLI::App& app);
}  // namespace paradyse::cli
