// run_with_killed_rank KILL_RANK KILL_AT_CALL: what `paradyse run --ranks 2 --model tiny-gpt --seq 64
// --steps 1 --timeout 30` does (the same launcher, rank environment, communicator and training
// steps), except that rank KILL_RANK's communicator kills its process at its KILL_AT_CALL-th call
// (0: never). A test-only program, so that no fault injection ships in paradyse.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "real_backend/communication_error.hpp"
#include "real_backend/launcher.hpp"
#include "real_backend/real_run.hpp"
#include "strategies/library.hpp"
#include "strategies/model.hpp"
#include "tests/real_backend/killing_communicator.hpp"

int main(int argc, char** argv) {
  using namespace paradyse;
  if (argc != 3) {
    std::cerr << "usage: run_with_killed_rank KILL_RANK KILL_AT_CALL\n";
    return 2;
  }
  const int kill_rank = std::stoi(argv[1]);
  const int kill_at_call = std::stoi(argv[2]);
  constexpr int ranks = 2;
  constexpr std::chrono::seconds timeout(30);
  try {
    const auto env = real::rank_from_environment();
    // As `paradyse run` (experiments/real_options.cpp): a rank waits `timeout` for a peer at worst.
    if (!env) return real::launch_local_ranks(ranks, timeout + std::chrono::seconds(10));
    const ModelSpec model = load_model("tiny-gpt");
    real::RunRequest request;
    request.model = &model;
    request.plan = uniform_plan(megatron_ts(), model.num_layers);
    request.lengths = {64};
    request.steps = 1;
    request.timeout = timeout;
    const std::vector<real::RunReport> reports = real::run_training(
        *env, {request},
        [&](std::unique_ptr<real::Communicator> communicator) -> std::unique_ptr<real::Communicator> {
          if (env->rank != kill_rank) return communicator;
          return std::make_unique<testing::KillingCommunicator>(std::move(communicator), kill_at_call);
        });
    if (!reports.empty()) std::cout << "loss per token " << reports[0].lengths[0].loss_per_token << "\n";
  } catch (const real::CommunicationError& e) {
    std::cerr << std::string("run_with_killed_rank: error: ") + e.what() +
                     "\n";  // one write: the launcher writes too
    return 4;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    std::cerr << "run_with_killed_rank: internal error: " + what.substr(0, what.find('\n')) + "\n";
    return 3;
  }
  return 0;
}
