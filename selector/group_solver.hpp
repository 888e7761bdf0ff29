// Which groups of ranks train which sequences of a global batch: the problem FlexSP (ASPLOS'25)
// solves per step with a MILP over length buckets (SCIP, 5–15 s), here with a greedy that takes
// milliseconds, and an exact MILP (group_milp.hpp) as its reference on small instances.
//
// The model both solve (FlexSP's): a step is rounds; in a round the job's N ranks split into groups
// of the allowed degrees (powers of two dividing N, each at an offset that is a multiple of its
// degree, so that a group wider than a node fills whole nodes); each group trains one micro-batch,
// the sequences packed into it, within the degree's packing limit (a longer sequence, up to the
// degree's capacity, is a micro-batch of its own: one that needs a leaner plan than a sequence alone
// was priced with); a micro-batch takes a fixed cost of its degree (what a micro-batch costs however
// few its tokens: its kernels' launches, its weights read) plus the sum of its sequences' times on that
// degree beyond that cost: the group's work; a round takes a fixed cost (the job's weight gathers and
// gradient sums) plus the work of its slowest group beyond what that group's degree hides of the fixed
// cost (the gathers prefetched under its layers' compute), if any; the step is the sum of its rounds.
//
// The greedy:
//  1. each sequence takes a degree, chosen several ways, each placed as in 2 and improved as in 3,
//     the fastest schedule kept: the degree where it costs the fewest GPU-seconds (degree × time),
//     or, if its time there exceeds the step's lower bound (the larger of the GPU-seconds over N and
//     the slowest sequence at its fastest degree), the smallest degree that brings it under the
//     bound, or its fastest; for a step of r rounds (r = 2 … 6), the fewest GPU-seconds among the
//     degrees where it takes at most bound / r (a round's length), or its fastest; the fewest
//     GPU-seconds among degrees of at least k, for each allowed k; its fastest degree;
//  2. slowest first, each sequence goes where it adds least to the step's time: into a group of its
//     degree that has room in the degree's capacity, into a new group on the lowest free aligned ranks
//     of a round, or into a new round (list scheduling; on a tie, the earlier round, and an existing
//     group before a new one, which keeps ranks free for what comes later);
//  3. single sequences move out of a round's slowest group into other groups with room, at those
//     groups' degrees, while a move shortens the step (a local search: list scheduling places the
//     short sequences last, where they can leave a round's slowest group with work that another
//     group has slack for).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace paradyse::selector {

// What the solvers know of the sequences of one global batch.
struct GroupProblem {
  int job = 1;                  // N ranks
  std::vector<int> degrees;     // allowed group degrees, ascending powers of two dividing N
  std::vector<int64_t> tokens;  // per sequence
  // seconds[s][i]: what sequence s adds to a micro-batch on a group of degrees[i] (trained alone, it
  // takes micro_batch_s[i] more); infinity where it does not fit.
  std::vector<std::vector<double>> seconds;
  std::vector<int64_t> capacity_tokens;  // per degree: the most tokens one micro-batch may hold
  std::vector<double> micro_batch_s;     // per degree, or empty: none
  // Per degree, or empty: capacity_tokens. The most tokens a micro-batch of two or more sequences may
  // hold: what the plan that prices its sequences holds.
  std::vector<int64_t> packing_tokens;
  // What every round costs besides its groups' work (a grouped step's per-layer weight gathers and
  // gradient reduce-scatters over the job), added once per round.
  double round_s = 0;
  // Per degree, or empty: none. Of round_s, what a group's work on that degree hides: a round takes
  // round_s + max(0, its groups' largest work − hidden_s of that group's degree).
  std::vector<double> hidden_s;
  // The ranks of a shard group (hybrid sharding: a node), or 0: the job. Below the job, each shard
  // group keeps to its own rounds: it skips a round in which it has no group, and waits for another
  // only in a group that spans both (the groups of a round start together on every shard group they
  // span). A step is then its slowest shard group's rounds.
  int shard_degree = 0;
  int shard_ranks() const { return shard_degree == 0 ? job : shard_degree; }
  // What a step costs once besides its rounds (hybrid sharding: the replicas' sums of the gradients,
  // what the last round's backward leaves of them exposed).
  double step_s = 0;

  // The most tokens a micro-batch of `sequences` (at least one) may hold on degrees[degree_index].
  int64_t micro_batch_limit(std::size_t degree_index, std::size_t sequences) const {
    return sequences > 1 && !packing_tokens.empty() ? packing_tokens[degree_index]
                                                    : capacity_tokens[degree_index];
  }
  double micro_batch_fixed_s(std::size_t degree_index) const {
    return micro_batch_s.empty() ? 0 : micro_batch_s[degree_index];
  }
  double hidden_round_s(std::size_t degree_index) const {
    return hidden_s.empty() ? 0 : hidden_s[degree_index];
  }
  // What a group of degrees[degree_index] doing `work_s` adds to its round beyond round_s.
  double beyond_round_s(std::size_t degree_index, double work_s) const {
    return std::max(0.0, work_s - hidden_round_s(degree_index));
  }
  static constexpr double kNoFit = std::numeric_limits<double>::infinity();
};

struct GroupInRound {
  int first_rank = 0;
  int degree = 1;
  std::vector<std::size_t> sequences;  // indices into GroupProblem::tokens
  double seconds = 0;                  // its work
};
struct SolvedRound {
  std::vector<GroupInRound> groups;  // by first rank
  double seconds = 0;  // beyond round_s: the largest of its groups' GroupProblem::beyond_round_s
};
struct GroupSchedule {
  std::vector<SolvedRound> rounds;
  double seconds = 0;                 // the step's (step_seconds)
  std::vector<std::size_t> unplaced;  // sequences that fit no degree
  double lower_bound_s = 0;           // no schedule of the problem's model is faster
  double mean_imbalance() const;      // over rounds: the largest group's work over the mean group's
};

// Throws InputError when the problem is malformed (degrees that are not powers of two dividing the
// job, a table of the wrong shape).
void check_group_problem(const GroupProblem& problem);
// The greedy above; under hybrid sharding (GroupProblem::shard_degree below the job), the faster of its
// schedule and shard_group_rounds.hpp's.
GroupSchedule solve_groups_greedy(const GroupProblem& problem);
// The greedy above, whatever the shard groups: the rounds are the job's.
GroupSchedule solve_job_rounds(const GroupProblem& problem);
// The step's time of a schedule that keeps the problem's rules: the sum of its rounds' times (round_s
// and the slowest group's work beyond what it hides), each shard group's own where shard groups keep to
// their own rounds (GroupProblem::shard_degree), the slowest shard group's; then step_s.
double step_seconds(const GroupProblem& problem, const GroupSchedule& schedule);
// When each shard group ends the schedule's rounds (one entry, the step's time, when the shard group is
// the job).
std::vector<double> shard_group_seconds(const GroupProblem& problem, const GroupSchedule& schedule);
// Step 3 of the greedy, on any schedule of `problem`: while moving one sequence out of a round's slowest
// group into another group, of that round or another, that holds it shortens the step, the first such
// move is made; a round left without sequences is dropped, and the schedule's times are recomputed.
void improve_schedule(const GroupProblem& problem, GroupSchedule& schedule);
// The problem's objective for a schedule (step_seconds); throws
// when the schedule breaks a rule of the model (overlapping or misaligned groups, capacity, a
// sequence placed twice or not at all though it fits).
double schedule_seconds(const GroupProblem& problem, const GroupSchedule& schedule);

}  // namespace paradyse::selector
