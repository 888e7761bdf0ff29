// The `paradyse trace` subcommands (list, stats, convert); registered by experiments/main.cpp.
#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

// `paradyse trace`: the bundled length traces, statistics of any trace, conversion to the Protobuf form.
void add_trace_command(CLI::App& app);

}  // namespace paradyse::cli
