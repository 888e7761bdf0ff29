// The exact reference for the group solver (group_solver.hpp): the same model, in the job's rounds
// (solve_job_rounds), as a mixed-integer program, solved by COIN-OR CBC, for small instances. Kept out of the
// selector library so that only what compares against it links CBC.
//
// Slots are every aligned group (each allowed degree d at offsets 0, d, 2d, ...); per round r,
// z[g][r] = 1 when slot g is a group of round r, x[s][g][r] = 1 when sequence s is in it, T[r] the
// round's time, u[r] = 1 when round r is used. Minimise Σ T[r] + round_s·Σ u[r] subject to: each
// sequence that fits some degree is placed once; a sequence only in a slot in use; the slots of a round that
// share a rank, at most one in use; a slot's tokens within its degree's capacity; T[r] at least each slot's
// summed sequence times; and T[r] ≥ T[r+1] (symmetry); u[r] ≥ z[g][r]. Rounds: `max_rounds`.
#pragma once

#include "selector/group_solver.hpp"

namespace paradyse::selector {

struct MilpSolution {
  GroupSchedule schedule;   // empty rounds dropped
  bool found = false;       // CBC found a feasible schedule within the time limit
  bool optimal = false;     // and proved it optimal
  double best_bound_s = 0;  // CBC's lower bound on the objective
};

MilpSolution solve_groups_milp(const GroupProblem& problem, int max_rounds, double time_limit_s);

}  // namespace paradyse::selector
