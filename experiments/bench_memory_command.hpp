// `paradyse bench-memory`: the maximum resident memory of an analytic compare over ever longer
// resampled traces, to show that it does not grow with the trace.
#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {
void add_bench_memory_command(CLI::App& app);
}  // namespace paradyse::cli
