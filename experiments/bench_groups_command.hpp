// `paradyse bench-groups`: the group solver against the exact MILP, and its solve time.
#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {
void add_bench_groups_command(CLI::App& app);
}  // namespace paradyse::cli
