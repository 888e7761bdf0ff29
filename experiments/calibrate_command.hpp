#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse calibrate`: measure this machine into a cluster file (the local-cpu preset).
void add_calibrate_command(CLI::App& app);

}  // namespace paradyse::cli
