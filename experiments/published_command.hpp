#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse published`: predictions against published measurements of real training runs.
void add_published_command(CLI::App& app);

}  // namespace paradyse::cli
