// The profiling step of the learned cost model: every strategy's uniform plan at each length, timed
// by the simulator (or estimated), sized by the fold of its allocations, with the activations one
// layer keeps taken from its traced program (the same in both).
#pragma once

#include <vector>

#include "costmodel/estimate.hpp"
#include "costmodel/profile.hpp"
#include "sim/simulator.hpp"

namespace paradyse::evaluation {

// Strategies that cannot run at `degree` are left out; `simulator` null: the analytic model times.
costmodel::Profile profile_uniform_plans(costmodel::Estimator& estimator, sim::Simulator* simulator,
                                         int degree, int64_t batch,
                                         const std::vector<const Strategy*>& strategies,
                                         const std::vector<int64_t>& lengths);

}  // namespace paradyse::evaluation
