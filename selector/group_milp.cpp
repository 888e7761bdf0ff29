#include "selector/group_milp.hpp"

#include <CbcModel.hpp>
#include <CoinPackedMatrix.hpp>
#include <CoinPackedVector.hpp>
#include <OsiClpSolverInterface.hpp>

#include <algorithm>
#include <cmath>

namespace paradyse::selector {
namespace {

struct Slot {
  std::size_t degree_index;
  int first_rank;
};

}  // namespace

MilpSolution solve_groups_milp(const GroupProblem& problem, int max_rounds, double time_limit_s) {
  check_group_problem(problem);
  const std::size_t n = problem.tokens.size();
  std::vector<Slot> slots;
  for (std::size_t i = 0; i < problem.degrees.size(); ++i)
    for (int first = 0; first < problem.job; first += problem.degrees[i]) slots.push_back({i, first});
  const auto fits = [&](std::size_t s, std::size_t i) {
    return std::isfinite(problem.seconds[s][i]) && problem.tokens[s] <= problem.capacity_tokens[i];
  };
  // Times in milliseconds keep CBC's tolerances meaningful.
  constexpr double kScale = 1e3;

  std::vector<double> col_lb, col_ub, objective;
  std::vector<int> integers;
  const auto add_column = [&](double ub, double cost, bool integer) {
    col_lb.push_back(0);
    col_ub.push_back(ub);
    objective.push_back(cost);
    if (integer) integers.push_back(static_cast<int>(col_lb.size()) - 1);
    return static_cast<int>(col_lb.size()) - 1;
  };
  const auto rounds = static_cast<std::size_t>(max_rounds);
  std::vector<int> round_time(rounds);
  for (std::size_t r = 0; r < rounds; ++r) round_time[r] = add_column(COIN_DBL_MAX, 1, false);
  std::vector<int> round_used(rounds);  // pays the problem's round_s
  for (std::size_t r = 0; r < rounds; ++r) round_used[r] = add_column(1, kScale * problem.round_s, true);
  std::vector<std::vector<int>> slot_used(slots.size(), std::vector<int>(rounds));
  for (auto& per_round : slot_used)
    for (int& column : per_round) column = add_column(1, 0, true);
  struct Placement {
    std::size_t sequence, slot, round;
    int column;
  };
  std::vector<Placement> placements;
  std::vector<bool> placeable(n, false);
  for (std::size_t s = 0; s < n; ++s)
    for (std::size_t g = 0; g < slots.size(); ++g) {
      if (!fits(s, slots[g].degree_index)) continue;
      placeable[s] = true;
      for (std::size_t r = 0; r < rounds; ++r) placements.push_back({s, g, r, add_column(1, 0, true)});
    }

  CoinPackedMatrix matrix(false, 0, 0);
  matrix.setDimensions(0, static_cast<int>(col_lb.size()));
  std::vector<double> row_lb, row_ub;
  const auto add_row = [&](const CoinPackedVector& row, double lb, double ub) {
    matrix.appendRow(row);
    row_lb.push_back(lb);
    row_ub.push_back(ub);
  };
  // A sequence over its degree's packing limit is a micro-batch of its own ("solo"): the packed
  // sequences' tokens stay within the packing limit, and a solo one leaves room for no other:
  // n · solo + packed ≤ n.
  const auto solo = [&](std::size_t s, std::size_t i) {
    return problem.tokens[s] > problem.micro_batch_limit(i, 2);
  };
  std::vector<CoinPackedVector> once(n), tokens(slots.size() * rounds), work(slots.size() * rounds),
      alone(slots.size() * rounds);
  for (const Placement& p : placements) {
    once[p.sequence].insert(p.column, 1);
    const std::size_t i = slots[p.slot].degree_index;
    const bool is_solo = solo(p.sequence, i);
    alone[p.slot * rounds + p.round].insert(p.column, is_solo ? static_cast<double>(n) : 1.0);
    if (!is_solo)
      tokens[p.slot * rounds + p.round].insert(p.column, static_cast<double>(problem.tokens[p.sequence]));
    work[p.slot * rounds + p.round].insert(p.column, kScale * problem.seconds[p.sequence][i]);
    CoinPackedVector in_use;  // x ≤ z
    in_use.insert(p.column, 1);
    in_use.insert(slot_used[p.slot][p.round], -1);
    add_row(in_use, -COIN_DBL_MAX, 0);
  }
  for (std::size_t s = 0; s < n; ++s)
    if (placeable[s]) add_row(once[s], 1, 1);
  for (std::size_t g = 0; g < slots.size(); ++g)
    for (std::size_t r = 0; r < rounds; ++r) {
      const double packing = static_cast<double>(problem.micro_batch_limit(slots[g].degree_index, 2));
      add_row(tokens[g * rounds + r], -COIN_DBL_MAX, packing);
      add_row(alone[g * rounds + r], -COIN_DBL_MAX, static_cast<double>(n));
      CoinPackedVector& slower = work[g * rounds + r];
      slower.insert(round_time[r], -1);
      // round_time ≥ the group's work beyond what its degree hides (and ≥ 0, its bound).
      const std::size_t i = slots[g].degree_index;
      if (const double fixed_s = problem.micro_batch_fixed_s(i) - problem.hidden_round_s(i); fixed_s != 0)
        slower.insert(slot_used[g][r], kScale * fixed_s);
      add_row(slower, -COIN_DBL_MAX, 0);
    }
  for (std::size_t g = 0; g < slots.size(); ++g)  // a slot in use uses its round
    for (std::size_t r = 0; r < rounds; ++r) {
      CoinPackedVector uses;
      uses.insert(slot_used[g][r], 1);
      uses.insert(round_used[r], -1);
      add_row(uses, -COIN_DBL_MAX, 0);
    }
  for (int rank = 0; rank < problem.job; ++rank)
    for (std::size_t r = 0; r < rounds; ++r) {
      CoinPackedVector one_group;
      for (std::size_t g = 0; g < slots.size(); ++g) {
        const int degree = problem.degrees[slots[g].degree_index];
        if (rank >= slots[g].first_rank && rank < slots[g].first_rank + degree)
          one_group.insert(slot_used[g][r], 1);
      }
      add_row(one_group, -COIN_DBL_MAX, 1);
    }
  for (std::size_t r = 0; r + 1 < rounds; ++r) {
    CoinPackedVector ordered;
    ordered.insert(round_time[r], 1);
    ordered.insert(round_time[r + 1], -1);
    add_row(ordered, 0, COIN_DBL_MAX);
  }

  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(matrix, col_lb.data(), col_ub.data(), objective.data(), row_lb.data(), row_ub.data());
  for (const int column : integers) solver.setInteger(column);
  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.setMaximumSeconds(time_limit_s);
  model.branchAndBound();

  MilpSolution result;
  result.best_bound_s = model.getBestPossibleObjValue() / kScale;
  const double* values = model.bestSolution();
  if (values == nullptr) return result;
  result.found = true;
  result.optimal = model.isProvenOptimal();
  for (std::size_t s = 0; s < n; ++s)
    if (!placeable[s]) result.schedule.unplaced.push_back(s);
  for (std::size_t r = 0; r < rounds; ++r) {
    SolvedRound round;
    for (std::size_t g = 0; g < slots.size(); ++g) {
      if (values[slot_used[g][r]] < 0.5) continue;
      GroupInRound group{slots[g].first_rank,
                         problem.degrees[slots[g].degree_index],
                         {},
                         problem.micro_batch_fixed_s(slots[g].degree_index)};
      for (const Placement& p : placements)
        if (p.slot == g && p.round == r && values[p.column] > 0.5) {
          group.sequences.push_back(p.sequence);
          group.seconds += problem.seconds[p.sequence][slots[g].degree_index];
        }
      if (group.sequences.empty()) continue;
      round.seconds = std::max(round.seconds, problem.beyond_round_s(slots[g].degree_index, group.seconds));
      round.groups.push_back(std::move(group));
    }
    if (round.groups.empty()) continue;
    std::sort(round.groups.begin(), round.groups.end(),
              [](const GroupInRound& a, const GroupInRound& b) { return a.first_rank < b.first_rank; });
    result.schedule.seconds += problem.round_s + round.seconds;
    result.schedule.rounds.push_back(std::move(round));
  }
  return result;
}

}  // namespace paradyse::selector
