#include "selector/group_solver.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "common/errors.hpp"

namespace paradyse::selector {
namespace {

// Ranks of one round in use.
class RoundRanks {
 public:
  explicit RoundRanks(int job) : used_(static_cast<std::size_t>(job), false) {}
  bool free(int first, int degree) const {
    return std::none_of(used_.begin() + first, used_.begin() + first + degree, [](bool u) { return u; });
  }
  // The lowest offset, a multiple of `degree`, where `degree` ranks are free; -1 when none is.
  int free_block(int degree) const {
    for (int first = 0; first + degree <= static_cast<int>(used_.size()); first += degree)
      if (free(first, degree)) return first;
    return -1;
  }
  void take(int first, int degree) { std::fill(used_.begin() + first, used_.begin() + first + degree, true); }

 private:
  std::vector<bool> used_;
};

int64_t micro_batch_tokens(const GroupProblem& problem, const GroupInRound& group) {
  int64_t tokens = 0;
  for (const std::size_t s : group.sequences) tokens += problem.tokens[s];
  return tokens;
}

bool power_of_two(int n) {
  return n > 0 && (n & (n - 1)) == 0;
}

}  // namespace

double GroupSchedule::mean_imbalance() const {
  if (rounds.empty()) return 1;
  double sum = 0;
  for (const SolvedRound& round : rounds) {
    double total = 0, largest = 0;
    for (const GroupInRound& g : round.groups) {
      total += g.seconds;
      largest = std::max(largest, g.seconds);
    }
    const double mean = total / static_cast<double>(round.groups.size());
    sum += mean > 0 ? largest / mean : 1;
  }
  return sum / static_cast<double>(rounds.size());
}

void check_group_problem(const GroupProblem& problem) {
  if (problem.job < 1) throw InputError("", 0, "job", "expected at least one rank");
  if (problem.degrees.empty()) throw InputError("", 0, "degrees", "expected at least one group degree");
  for (std::size_t i = 0; i < problem.degrees.size(); ++i) {
    const int d = problem.degrees[i];
    if (!power_of_two(d) || problem.job % d != 0 || (i > 0 && d <= problem.degrees[i - 1]))
      throw InputError("", 0, "degrees",
                       "expected ascending powers of two that divide the job's " +
                           std::to_string(problem.job) + " ranks, got " + std::to_string(d));
  }
  if (problem.seconds.size() != problem.tokens.size() ||
      problem.capacity_tokens.size() != problem.degrees.size() ||
      (!problem.micro_batch_s.empty() && problem.micro_batch_s.size() != problem.degrees.size()) ||
      (!problem.packing_tokens.empty() && problem.packing_tokens.size() != problem.degrees.size()) ||
      (!problem.hidden_s.empty() && problem.hidden_s.size() != problem.degrees.size()))
    throw InputError("", 0, "seconds",
                     "expected a time per sequence and degree, and a capacity (and any micro-batch cost and "
                     "hidden round time) per degree");
  for (const std::vector<double>& row : problem.seconds)
    if (row.size() != problem.degrees.size())
      throw InputError("", 0, "seconds", "expected a time per sequence and degree");
}

namespace {

// Step 2 of the greedy for sequences whose degrees (indices; degrees.size(): none fits) are chosen.
GroupSchedule place(const GroupProblem& problem, const std::vector<std::size_t>& degree_of);

}  // namespace

GroupSchedule solve_groups_greedy(const GroupProblem& problem) {
  check_group_problem(problem);
  const std::size_t n = problem.tokens.size(), degrees = problem.degrees.size();
  const auto fits = [&](std::size_t s, std::size_t i) {
    return std::isfinite(problem.seconds[s][i]) && problem.tokens[s] <= problem.capacity_tokens[i];
  };
  const auto gpu_s = [&](std::size_t s, std::size_t i) { return problem.degrees[i] * problem.seconds[s][i]; };

  // 1. Degrees per sequence, several ways; each is placed, and the fastest schedule wins. The first:
  // the fewest GPU-seconds, faster where it would hold a round back (the bound); then the fewest
  // GPU-seconds among degrees of at least k, for each allowed k; then the fastest degree.
  std::vector<std::size_t> cheapest(n, degrees), fastest(n, degrees);
  double gpu_seconds = 0, slowest = 0;
  for (std::size_t s = 0; s < n; ++s) {
    for (std::size_t i = 0; i < degrees; ++i) {
      if (!fits(s, i)) continue;
      if (cheapest[s] == degrees || gpu_s(s, i) < gpu_s(s, cheapest[s])) cheapest[s] = i;
      if (fastest[s] == degrees || problem.seconds[s][i] < problem.seconds[s][fastest[s]]) fastest[s] = i;
    }
    if (cheapest[s] == degrees) continue;
    gpu_seconds += gpu_s(s, cheapest[s]);
    double alone = std::numeric_limits<double>::infinity();  // in a micro-batch of its own, at best
    for (std::size_t i = 0; i < degrees; ++i)
      if (fits(s, i)) alone = std::min(alone, problem.micro_batch_fixed_s(i) + problem.seconds[s][i]);
    slowest = std::max(slowest, alone);
  }
  const double bound = std::max(gpu_seconds / problem.job, slowest);
  std::vector<std::vector<std::size_t>> choices;
  std::vector<std::size_t>& bounded = choices.emplace_back(cheapest);
  for (std::size_t s = 0; s < n; ++s) {
    if (bounded[s] == degrees || problem.seconds[s][bounded[s]] <= bound) continue;
    std::size_t faster = bounded[s];
    for (std::size_t i = bounded[s] + 1; i < degrees; ++i) {
      if (!fits(s, i)) continue;
      if (problem.seconds[s][i] <= bound) {
        faster = i;
        break;
      }
      if (problem.seconds[s][i] < problem.seconds[s][faster]) faster = i;
    }
    bounded[s] = faster;
  }
  for (std::size_t floor = 1; floor < degrees; ++floor) {
    std::vector<std::size_t>& at_least = choices.emplace_back(cheapest);
    for (std::size_t s = 0; s < n; ++s) {
      if (cheapest[s] == degrees || cheapest[s] >= floor) continue;
      for (std::size_t i = floor; i < degrees; ++i)
        if (fits(s, i) && (at_least[s] < floor || gpu_s(s, i) < gpu_s(s, at_least[s]))) at_least[s] = i;
    }
  }
  choices.push_back(fastest);
  GroupSchedule best = place(problem, choices.front());
  for (std::size_t c = 1; c < choices.size(); ++c) {
    GroupSchedule schedule = place(problem, choices[c]);
    if (schedule.seconds < best.seconds) best = std::move(schedule);
  }
  // Each round takes round_s and at least its largest group's work beyond the most any degree hides.
  if (best.unplaced.size() < n) {
    double most_hidden = 0;
    for (std::size_t i = 0; i < degrees; ++i) most_hidden = std::max(most_hidden, problem.hidden_round_s(i));
    best.lower_bound_s = problem.round_s + std::max(0.0, bound - most_hidden);
  } else {
    best.lower_bound_s = bound;
  }
  return best;
}

namespace {

GroupSchedule place(const GroupProblem& problem, const std::vector<std::size_t>& degree_of) {
  const std::size_t n = problem.tokens.size(), degrees = problem.degrees.size();
  GroupSchedule schedule;
  for (std::size_t s = 0; s < n; ++s)
    if (degree_of[s] == degrees) schedule.unplaced.push_back(s);

  // 2. Sequences slowest first, each where it adds least to the step: stacked into a group of its
  // degree with room in its capacity, a new group on free aligned ranks of a round, or a new round.
  std::vector<std::size_t> order;
  for (std::size_t s = 0; s < n; ++s)
    if (degree_of[s] != degrees) order.push_back(s);
  const auto time_of = [&](std::size_t s) { return problem.seconds[s][degree_of[s]]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return time_of(a) > time_of(b); });
  std::vector<RoundRanks> ranks;
  for (const std::size_t s : order) {
    const std::size_t i = degree_of[s];
    const int degree = problem.degrees[i];
    const double t = time_of(s);
    const double alone = problem.micro_batch_fixed_s(i) + t;  // in a micro-batch of its own
    // The best place so far: its round (rounds.size(): a new one), its group (groups.size(): a new one).
    double best_increase = std::numeric_limits<double>::infinity();
    std::size_t best_round = schedule.rounds.size(), best_group = 0;
    int best_first = 0;
    for (std::size_t r = 0; r < schedule.rounds.size(); ++r) {
      SolvedRound& round = schedule.rounds[r];
      for (std::size_t g = 0; g < round.groups.size(); ++g) {
        const GroupInRound& group = round.groups[g];
        if (group.degree != degree || micro_batch_tokens(problem, group) + problem.tokens[s] >
                                          problem.micro_batch_limit(i, group.sequences.size() + 1))
          continue;
        const double increase = std::max(0.0, problem.beyond_round_s(i, group.seconds + t) - round.seconds);
        if (increase < best_increase) {
          best_increase = increase;
          best_round = r;
          best_group = g;
        }
      }
      const int first = ranks[r].free_block(degree);
      if (first >= 0) {
        const double increase = std::max(0.0, problem.beyond_round_s(i, alone) - round.seconds);
        if (increase < best_increase) {
          best_increase = increase;
          best_round = r;
          best_group = round.groups.size();
          best_first = first;
        }
      }
    }
    if (best_increase > problem.round_s + problem.beyond_round_s(i, alone)) {  // a round of its own
      best_round = schedule.rounds.size();
      schedule.rounds.emplace_back();
      ranks.emplace_back(problem.job);
      best_group = 0;
      best_first = 0;
    }
    SolvedRound& round = schedule.rounds[best_round];
    if (best_group == round.groups.size()) {
      round.groups.push_back({best_first, degree, {}, problem.micro_batch_fixed_s(i)});
      ranks[best_round].take(best_first, degree);
    }
    GroupInRound& group = round.groups[best_group];
    group.sequences.push_back(s);
    group.seconds += t;
    round.seconds = std::max(round.seconds, problem.beyond_round_s(i, group.seconds));
  }
  for (SolvedRound& round : schedule.rounds) {
    std::sort(round.groups.begin(), round.groups.end(),
              [](const GroupInRound& a, const GroupInRound& b) { return a.first_rank < b.first_rank; });
    schedule.seconds += problem.round_s + round.seconds;
  }
  return schedule;
}

}  // namespace

double schedule_seconds(const GroupProblem& problem, const GroupSchedule& schedule) {
  std::vector<int> placed(problem.tokens.size(), 0);
  double total = 0;
  for (const SolvedRound& round : schedule.rounds) {
    RoundRanks ranks(problem.job);
    double slowest = 0;
    for (const GroupInRound& g : round.groups) {
      const auto it = std::find(problem.degrees.begin(), problem.degrees.end(), g.degree);
      PARADYSE_CHECK(it != problem.degrees.end() && g.first_rank % g.degree == 0 &&
                         g.first_rank + g.degree <= problem.job,
                     "a group of " + std::to_string(g.degree) + " at rank " + std::to_string(g.first_rank));
      PARADYSE_CHECK(ranks.free(g.first_rank, g.degree), "groups overlap");
      const auto i = static_cast<std::size_t>(it - problem.degrees.begin());
      int64_t tokens = 0;
      double seconds = problem.micro_batch_fixed_s(i);
      for (const std::size_t s : g.sequences) {
        ++placed[s];
        tokens += problem.tokens[s];
        seconds += problem.seconds[s][i];
      }
      PARADYSE_CHECK(tokens <= problem.micro_batch_limit(i, g.sequences.size()),
                     "a micro-batch over its degree's capacity or packing limit");
      ranks.take(g.first_rank, g.degree);
      slowest = std::max(slowest, problem.beyond_round_s(i, seconds));
    }
    total += problem.round_s + slowest;
  }
  for (std::size_t s = 0; s < placed.size(); ++s) {
    const bool unplaced =
        std::find(schedule.unplaced.begin(), schedule.unplaced.end(), s) != schedule.unplaced.end();
    PARADYSE_CHECK(placed[s] == (unplaced ? 0 : 1),
                   "sequence " + std::to_string(s) + " placed " + std::to_string(placed[s]) + " times");
  }
  return total;
}

}  // namespace paradyse::selector
