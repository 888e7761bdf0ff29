#include "experiments/command_line.hpp"

#include <fmt/core.h>

#include <string>

#include "common/errors.hpp"
#include "real_backend/communication_error.hpp"

namespace paradyse::cli {

int run_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
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
