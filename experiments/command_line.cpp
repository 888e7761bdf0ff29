#include "experiments/command_line.hpp"

#include <fmt/core.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "common/errors.hpp"
#include "common/printable_text.hpp"
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

// The checks every number flag of every command gets, by the type CLI11 converts it to: CLI11 takes
// "inf" and "nan" for a double, which no flag means, and "-1" for an unsigned, which it wraps around.
void check_number_flags(CLI::App& app) {
  const CLI::Validator finite(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end != text.c_str() && std::isfinite(value)) return "";
        return "expected a finite number, got '" + text + "'";
      },
      "");
  const CLI::Validator non_negative(
      [](std::string& text) -> std::string {
        if (!text.starts_with('-')) return "";
        return "expected a non-negative whole number, got '" + text + "'";
      },
      "");
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    const std::string base = type.substr(0, type.find(':'));
    if (base == "FLOAT") option->check(finite);
    if (base == "UINT") option->check(non_negative);
  }
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) check_number_flags(*command);
}

// CLI11's message, except where it does not say what was expected: a missing or unknown subcommand.
std::string parse_error_text(CLI::App& app, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::RequiredError*>(&e) == nullptr ||
      std::string(e.what()) != "A subcommand is required")
    return e.what();
  CLI::App* command = &app;
  while (!command->get_subcommands().empty()) command = command->get_subcommands().front();
  std::string names;
  for (const CLI::App* sub : command->get_subcommands([](CLI::App* c) { return !c->get_name().empty(); }))
    names += (names.empty() ? "" : ", ") + sub->get_name();
  const std::vector<std::string> rest = command->remaining();
  return "expected a subcommand of '" + command_path(app) + "' (" + names + "), got " +
         (rest.empty() ? std::string("none") : "'" + rest.front() + "'");
}

}  // namespace

int run_command_line(CLI::App& app, int argc, char** argv) {
  check_number_flags(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are ParseErrors with exit status 0; CLI11 prints them.
    if (e.get_exit_code() == 0) return app.exit(e);
    // A bad flag is the user's input like any other: the same prefix and status, not CLI11's own.
    fmt::print(stderr, "paradyse: error: {}\nSee '{} --help'.\n", printable_text(parse_error_text(app, e)),
               command_path(app));
    return 2;
  } catch (const InputError& e) {
    fmt::print(stderr, "paradyse: error: {}\n", printable_text(e.what()));
    return 2;
  } catch (const real::CommunicationError& e) {
    fmt::print(stderr, "paradyse: error: {}\n", e.what());
    return real::kLostRankStatus;
  } catch (const std::exception& e) {
    // The first line: LibTorch's errors go on with a stack trace nobody running paradyse needs.
    const std::string what = e.what();
    fmt::print(stderr, "paradyse: internal error: {}\n", printable_text(what.substr(0, what.find('\n'))));
    return 3;
  }
  return 0;
}

}  // namespace paradyse::cli
