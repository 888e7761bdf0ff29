#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse run`: training steps for real on P ranks (LibTorch, Gloo on CPU or NCCL on GPU).
void add_run_command(CLI::App& app);

}  // namespace paradyse::cli
