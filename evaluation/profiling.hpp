// The profiling step of the learned cost model: every strategy's uniform plan at each length, timed
// by the simulator (or estimated), sized by the fold of its allocations, with the activations one
// layer keeps taken from its traced program (the same in both).
#pragma once

#include <vector>

#include "steps/estimate.hpp"
#include "steps/profile.hpp"
#include "steps/step_simulator.hpp"

namespace paradyse::evaluation {

// Strategies that cannot run at `degree` are left out; `simulator` null: the analytic model times.
steps::Profile profile_uniform_plans(steps::Estimator& estimator, steps::StepSimulator* simulator, int degree,
                                     int64_t batch, const std::vector<const Strategy*>& strategies,
                                     const std::vector<int64_t>& lengths);

}  // namespace paradyse::evaluation
