// Group schedules under hybrid sharding (GroupProblem::shard_degree below the job): every node holds a
// replica of the weights and gathers them over its own GPUs, so a node keeps to its own rounds and
// waits for another only in a group that spans both (strategies/grouped_step.hpp). A step is then its
// slowest node's rounds, and nodes balance their work over the whole step instead of round by round.
//
// The schedule: the sequences that run on groups wider than a node (their fewest GPU-seconds there, or
// none fits a node, or alone they outlast a node's share of the step) take the first rounds, together,
// as the job-round greedy places them; then each node trains its share of the rest in rounds of its
// own, placed by the same greedy on the node's GPUs. Shares are dealt longest first to the least loaded
// node (by GPU-seconds at each sequence's cheapest degree in a node), then single sequences move from
// the slowest node to the fastest while that shortens the step. The faster of this schedule and the
// job-round greedy's (which every node can run too) is kept.
#pragma once

#include "selector/group_solver.hpp"

namespace paradyse::selector {

GroupSchedule solve_shard_group_rounds(const GroupProblem& problem);

}  // namespace paradyse::selector
