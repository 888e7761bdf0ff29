// What both executables do with a parsed command line: run the subcommand and turn its errors into
// a message on stderr and an exit status (2: the user's input, 3: an internal error, 4: a real run's
// communication failed).
#pragma once

#include <CLI/CLI.hpp>

namespace paradyse::cli {

int run_command_line(CLI::App& app, int argc, char** argv);

}  // namespace paradyse::cli
