// The launcher and a real run when a rank dies: real rank processes started by launch_local_ranks,
// one of them SIGKILLed mid-step by its communicator (killing_communicator.hpp, through the
// run_with_killed_rank program), and what the launcher and the surviving rank then report.
#include <catch2/catch.hpp>

#include <chrono>

#include "tests/experiments/run_paradyse.hpp"

namespace paradyse::testing {
namespace {

RunResult run_with_killed_rank(int kill_rank, int kill_at_call) {
  return run_program(PARADYSE_RUN_WITH_KILLED_RANK,
                     std::to_string(kill_rank) + " " + std::to_string(kill_at_call));
}

}  // namespace

TEST_CASE("launcher: a rank killed mid-step stops the others with an error instead of a hang",
          "[real][cli]") {
  const auto start = std::chrono::steady_clock::now();
  // Call 1 is the barrier before the warm-up step, so call 7 is the step's sixth collective.
  const RunResult r = run_with_killed_rank(1, 7);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.err);
  CHECK(r.exit_code == 4);  // a run that lost a rank
  CHECK(r.out.empty());     // rank 0 reported nothing
  CHECK_THAT(r.err, Catch::Contains("rank 1 of 2 was killed by signal 9"));
  // Rank 0 stopped on its own, with its communicator's error, not killed by the launcher later.
  CHECK_THAT(r.err,
             Catch::Contains("rank 0: ") && Catch::Contains("failed (a peer died or the group timed out)"));
  CHECK_THAT(r.err, !Catch::Contains("was still running"));
  CHECK_THAT(r.err, !Catch::Contains("barrier failed"));  // it died inside the step, not between steps
  CHECK(seconds < 30);  // rank 0 noticed the dropped connection, not its 30 s timeout
}

}  // namespace paradyse::testing
