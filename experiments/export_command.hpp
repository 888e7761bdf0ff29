#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse export`: a plan's per-rank programs as Chakra execution traces (chakra/export.hpp).
void add_export_command(CLI::App& app);

}  // namespace paradyse::cli
