#include "experiments/command_line.hpp"

#include <fmt/core.h>

#include <string>

#include "common/errors.hpp"
#include "real_backend/communication_error.hpp"

namespace paradyse::cli {
namespace {

// "paradyse compare": the subcommands the parse got to, for "see ... --help".
std::string command_path(const CLI::App& app) {
  std::string path = "paradyse";
  for (const CLI::App* command = &app; !command->get_subcommands().empty();) {
    command = command->get_subcommands().front();
    path += " " + command->get_name();
  }
  return path;
}

}  // namespace

int run_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are ParseErrors with exit status 0; CLI11 prints them.
    if (e.get_exit_code() == 0) return app.exit(e);
    // A bad flag is the user's input like any other: the same prefix and status, not CLI11's own.
    fmt::print(stderr, "paradyse: error: {}\nSee '{} --help'.\n", e.what(), command_path(app));
    return 2;
  } catch (const InputError& e) {
    fmt::print(stderr, "paradyse: error: {}\n", e.what());
    return 2;
  } catch (const real::CommunicationError& e) {
    fmt::print(stderr, "paradyse: error: {}\n", e.what());
    return 4;
  } catch (const std::exception& e) {
    // The first line: LibTorch's errors go on with a stack trace nobody running paradyse needs.
    const std::string what = e.what();
    fmt::print(stderr, "paradyse: internal error: {}\n", what.substr(0, what.find('\n')));
    return 3;
  }
  return 0;
}

}  // namespace paradyse::cli
