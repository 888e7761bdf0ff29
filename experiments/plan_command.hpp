#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse plan`: the plan each policy chooses per length, or the longest length each can plan.
void add_plan_command(CLI::App& app);
// `paradyse bench-plan`: decisions per second of the paradyse and optimal policies.
void add_bench_plan_command(CLI::App& app);

}  // namespace paradyse::cli
