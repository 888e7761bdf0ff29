#include "selector/group_solver.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "common/errors.hpp"
#include "selector/shard_group_rounds.hpp"

namespace paradyse::selector {
namespace {

// The step lengths in rounds for which the greedy tries to keep every sequence within a round (2 … this).
constexpr int kRoundCountsTried = 6;

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
  if (problem.shard_degree < 0 || (problem.shard_degree > 0 && problem.job % problem.shard_degree != 0))
    throw InputError("", 0, "shard group",
                     "expected a shard group of ranks that divides the job's " + std::to_string(problem.job) +
                         ", got " + std::to_string(problem.shard_degree));
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
  if (problem.shard_ranks() < problem.job) return solve_shard_group_rounds(problem);
  return solve_job_rounds(problem);
}

GroupSchedule solve_job_rounds(const GroupProblem& problem) {
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
  // A step of r rounds has rounds of about bound / r: a sequence that alone outlasts that on its cheapest
  // degree holds its round back while the round's other groups idle, so it takes the cheapest degree that
  // keeps it within a round, or its fastest.
  for (int rounds = 2; rounds <= kRoundCountsTried; ++rounds) {
    const double round_length_s = bound / rounds;
    std::vector<std::size_t>& within = choices.emplace_back(cheapest);
    for (std::size_t s = 0; s < n; ++s) {
      if (cheapest[s] == degrees || problem.seconds[s][cheapest[s]] <= round_length_s) continue;
      std::size_t chosen = degrees;
      for (std::size_t i = 0; i < degrees; ++i)
        if (fits(s, i) && problem.seconds[s][i] <= round_length_s &&
            (chosen == degrees || gpu_s(s, i) < gpu_s(s, chosen)))
          chosen = i;
      within[s] = chosen == degrees ? fastest[s] : chosen;
    }
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
  GroupSchedule best;
  for (std::size_t c = 0; c < choices.size(); ++c) {
    // Several ways often give the same degrees: each is placed once.
    if (std::find(choices.begin(), choices.begin() + static_cast<std::ptrdiff_t>(c), choices[c]) !=
        choices.begin() + static_cast<std::ptrdiff_t>(c))
      continue;
    GroupSchedule schedule = place(problem, choices[c]);
    improve_schedule(problem, schedule);
    if (c == 0 || schedule.seconds < best.seconds) best = std::move(schedule);
  }
  // Each round takes round_s and at least its largest group's work beyond the most any degree hides.
  if (best.unplaced.size() < n) {
    double most_hidden = 0;
    for (std::size_t i = 0; i < degrees; ++i) most_hidden = std::max(most_hidden, problem.hidden_round_s(i));
    best.lower_bound_s = problem.round_s + std::max(0.0, bound - most_hidden);
  } else {
    best.lower_bound_s = bound;
  }
  if (!best.rounds.empty()) {
    best.seconds += problem.step_s;
    best.lower_bound_s += problem.step_s;
  }
  return best;
}

namespace {

std::size_t degree_index(const GroupProblem& problem, int degree) {
  return static_cast<std::size_t>(std::find(problem.degrees.begin(), problem.degrees.end(), degree) -
                                  problem.degrees.begin());
}

// A round's three slowest groups by their work beyond what their degrees hide, so that the round's time
// with one or two of its groups changed is known without a pass over them all.
struct RoundTop {
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::array<std::size_t, 3> group{kNone, kNone, kNone};
  std::array<double, 3> beyond_s{};
  std::size_t groups = 0;
};

// What a move changes of a group: its work, or that it loses its last sequence.
struct WorkChange {
  std::size_t group = RoundTop::kNone;
  double beyond_s = 0;
  bool emptied = false;
};

}  // namespace

void improve_schedule(const GroupProblem& problem, GroupSchedule& schedule) {
  const auto index_of = [&](const GroupInRound& g) { return degree_index(problem, g.degree); };
  const auto beyond = [&](const GroupInRound& g, double work_s) {
    return problem.beyond_round_s(index_of(g), work_s);
  };
  const auto top_of = [&](const SolvedRound& round) {
    RoundTop top;
    top.groups = round.groups.size();
    for (std::size_t g = 0; g < round.groups.size(); ++g) {
      const double b = beyond(round.groups[g], round.groups[g].seconds);
      for (std::size_t k = 0; k < 3; ++k)
        if (top.group[k] == RoundTop::kNone || b > top.beyond_s[k]) {
          for (std::size_t m = 2; m > k; --m) {
            top.group[m] = top.group[m - 1];
            top.beyond_s[m] = top.beyond_s[m - 1];
          }
          top.group[k] = g;
          top.beyond_s[k] = b;
          break;
        }
    }
    return top;
  };
  // The round's time with changes `a` and `b` (to different groups, or none): round_s plus the slowest
  // group's work beyond what it hides; 0 when no group is left.
  const auto round_s = [&](const RoundTop& top, const WorkChange& a, const WorkChange& b) {
    const std::size_t emptied = (a.emptied ? 1 : 0) + (b.emptied ? 1 : 0);
    if (top.groups == emptied) return 0.0;
    double slowest = 0;
    for (std::size_t k = 0; k < 3; ++k)
      if (top.group[k] != RoundTop::kNone && top.group[k] != a.group && top.group[k] != b.group) {
        slowest = top.beyond_s[k];
        break;
      }
    for (const WorkChange* change : {&a, &b})
      if (change->group != RoundTop::kNone && !change->emptied) slowest = std::max(slowest, change->beyond_s);
    return problem.round_s + slowest;
  };
  std::vector<RoundTop> tops;
  std::vector<std::vector<int64_t>> tokens;  // per round and group
  for (const SolvedRound& round : schedule.rounds) {
    tops.push_back(top_of(round));
    std::vector<int64_t>& of_round = tokens.emplace_back();
    for (const GroupInRound& g : round.groups) of_round.push_back(micro_batch_tokens(problem, g));
  }
  constexpr double kGain = 1e-9;  // a move must shorten the step by more: each does, so the moves end
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t r = 0; r < schedule.rounds.size() && !moved; ++r) {
      SolvedRound& from = schedule.rounds[r];
      if (from.groups.empty()) continue;
      const std::size_t slow = tops[r].group[0];
      GroupInRound& source = from.groups[slow];
      const std::size_t i = index_of(source);
      const double from_before = round_s(tops[r], {}, {});
      for (std::size_t k = 0; k < source.sequences.size() && !moved; ++k) {
        const std::size_t s = source.sequences[k];
        const WorkChange out{slow, beyond(source, source.seconds - problem.seconds[s][i]),
                             source.sequences.size() == 1};
        const double saved = from_before - round_s(tops[r], out, {});
        if (saved <= kGain) continue;
        // Into another group, of this round or another, that holds it: the first that shortens the step.
        for (std::size_t r2 = 0; r2 < schedule.rounds.size() && !moved; ++r2) {
          SolvedRound& to = schedule.rounds[r2];
          const double to_before = round_s(tops[r2], {}, {});
          for (std::size_t h = 0; h < to.groups.size() && !moved; ++h) {
            if (r2 == r && h == slow) continue;
            GroupInRound& target = to.groups[h];
            const std::size_t j = index_of(target);
            if (!std::isfinite(problem.seconds[s][j]) || problem.tokens[s] > problem.capacity_tokens[j] ||
                tokens[r2][h] + problem.tokens[s] > problem.micro_batch_limit(j, target.sequences.size() + 1))
              continue;
            const WorkChange in{h, beyond(target, target.seconds + problem.seconds[s][j]), false};
            const double gain = r2 == r ? from_before - round_s(tops[r], out, in)
                                        : saved - (round_s(tops[r2], in, {}) - to_before);
            if (gain <= kGain) continue;
            target.sequences.push_back(s);
            target.seconds += problem.seconds[s][j];
            tokens[r2][h] += problem.tokens[s];
            source.sequences.erase(source.sequences.begin() + static_cast<std::ptrdiff_t>(k));
            source.seconds -= problem.seconds[s][i];
            tokens[r][slow] -= problem.tokens[s];
            if (source.sequences.empty()) {
              from.groups.erase(from.groups.begin() + static_cast<std::ptrdiff_t>(slow));
              tokens[r].erase(tokens[r].begin() + static_cast<std::ptrdiff_t>(slow));
            }
            tops[r] = top_of(from);
            tops[r2] = top_of(to);
            moved = true;
          }
        }
      }
    }
  }
  std::erase_if(schedule.rounds, [](const SolvedRound& round) { return round.groups.empty(); });
  schedule.seconds = 0;
  for (SolvedRound& round : schedule.rounds) {
    round.seconds = round_s(top_of(round), {}, {}) - problem.round_s;
    schedule.seconds += problem.round_s + round.seconds;
  }
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

double step_seconds(const GroupProblem& problem, const GroupSchedule& schedule) {
  if (schedule.rounds.empty()) return 0;
  const std::vector<double> ends = shard_group_seconds(problem, schedule);
  return *std::max_element(ends.begin(), ends.end()) + problem.step_s;
}

std::vector<double> shard_group_seconds(const GroupProblem& problem, const GroupSchedule& schedule) {
  const int shard = problem.shard_ranks();
  // When each shard group may run ahead: when it is ready, and each round's time on it.
  std::vector<double> ready(static_cast<std::size_t>(problem.job / shard), 0), round_on(ready.size());
  for (const SolvedRound& round : schedule.rounds) {
    std::fill(round_on.begin(), round_on.end(), -1.0);  // -1: no group of the round on it
    for (const GroupInRound& g : round.groups) {
      const std::size_t i = degree_index(problem, g.degree);
      double work = problem.micro_batch_fixed_s(i);
      for (const std::size_t s : g.sequences) work += problem.seconds[s][i];
      const auto first = static_cast<std::size_t>(g.first_rank / shard),
                 last = static_cast<std::size_t>((g.first_rank + g.degree - 1) / shard);
      // A group that spans shard groups starts when the last of them is ready.
      const double start = *std::max_element(ready.begin() + static_cast<std::ptrdiff_t>(first),
                                             ready.begin() + static_cast<std::ptrdiff_t>(last) + 1);
      for (std::size_t b = first; b <= last; ++b) {
        ready[b] = start;
        round_on[b] = std::max(round_on[b], problem.beyond_round_s(i, work));
      }
    }
    for (std::size_t b = 0; b < ready.size(); ++b)
      if (round_on[b] >= 0) ready[b] += problem.round_s + round_on[b];
  }
  return ready;
}

double schedule_seconds(const GroupProblem& problem, const GroupSchedule& schedule) {
  std::vector<int> placed(problem.tokens.size(), 0);
  for (const SolvedRound& round : schedule.rounds) {
    RoundRanks ranks(problem.job);
    for (const GroupInRound& g : round.groups) {
      const auto it = std::find(problem.degrees.begin(), problem.degrees.end(), g.degree);
      PARADYSE_CHECK(it != problem.degrees.end() && g.first_rank % g.degree == 0 &&
                         g.first_rank + g.degree <= problem.job,
                     "a group of " + std::to_string(g.degree) + " at rank " + std::to_string(g.first_rank));
      PARADYSE_CHECK(ranks.free(g.first_rank, g.degree), "groups overlap");
      const auto i = static_cast<std::size_t>(it - problem.degrees.begin());
      int64_t tokens = 0;
      for (const std::size_t s : g.sequences) {
        ++placed[s];
        tokens += problem.tokens[s];
      }
      PARADYSE_CHECK(tokens <= problem.micro_batch_limit(i, g.sequences.size()),
                     "a micro-batch over its degree's capacity or packing limit");
      ranks.take(g.first_rank, g.degree);
    }
  }
  for (std::size_t s = 0; s < placed.size(); ++s) {
    const bool unplaced =
        std::find(schedule.unplaced.begin(), schedule.unplaced.end(), s) != schedule.unplaced.end();
    PARADYSE_CHECK(placed[s] == (unplaced ? 0 : 1),
                   "sequence " + std::to_string(s) + " placed " + std::to_string(placed[s]) + " times");
  }
  return step_seconds(problem, schedule);
}

}  // namespace paradyse::selector
