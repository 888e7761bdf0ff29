#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse simulate`: one training iteration of a plan on the SimGrid model of the cluster.
void add_simulate_command(CLI::App& app);
// `paradyse bench-simulate`: wall time to simulate one iteration per strategy.
void add_bench_simulate_command(CLI::App& app);

}  // namespace paradyse::cli
