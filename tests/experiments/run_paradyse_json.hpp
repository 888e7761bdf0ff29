// Runs paradyse with --json in the arguments and parses what it printed; a failed run throws with its
// arguments and error, which Catch reports as the test's failure.
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

#include "tests/experiments/run_paradyse.hpp"

namespace paradyse::testing {

inline nlohmann::json run_paradyse_json(const std::string& arguments) {
  const RunResult r = run_paradyse(arguments);
  if (r.exit_code != 0)
    throw std::runtime_error("paradyse " + arguments + " exited " + std::to_string(r.exit_code) + ": " +
                             r.err);
  return nlohmann::json::parse(r.out);
}

}  // namespace paradyse::testing
