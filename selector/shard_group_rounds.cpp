#include "selector/shard_group_rounds.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

namespace paradyse::selector {
namespace {

// The local search between nodes: at most this many tries a node (each solves two nodes again, so that
// a step of thousands of GPUs stays within seconds), and this many sequences tried for one move.
constexpr std::size_t kTriesPerNode = 8;
constexpr std::size_t kCandidatesPerMove = 6;

// The sub-problem of `sequences` on `job` ranks with the problem's degrees up to `job`, in rounds of that
// job; a schedule of it names its sequences by their place in `sequences`.
GroupProblem sub_problem(const GroupProblem& problem, const std::vector<std::size_t>& sequences, int job) {
  GroupProblem sub;
  sub.job = job;
  sub.round_s = problem.round_s;
  for (std::size_t i = 0; i < problem.degrees.size() && problem.degrees[i] <= job; ++i) {
    sub.degrees.push_back(problem.degrees[i]);
    sub.capacity_tokens.push_back(problem.capacity_tokens[i]);
    if (!problem.micro_batch_s.empty()) sub.micro_batch_s.push_back(problem.micro_batch_s[i]);
    if (!problem.packing_tokens.empty()) sub.packing_tokens.push_back(problem.packing_tokens[i]);
    if (!problem.hidden_s.empty()) sub.hidden_s.push_back(problem.hidden_s[i]);
  }
  for (const std::size_t s : sequences) {
    sub.tokens.push_back(problem.tokens[s]);
    sub.seconds.emplace_back(problem.seconds[s].begin(),
                             problem.seconds[s].begin() + static_cast<std::ptrdiff_t>(sub.degrees.size()));
  }
  return sub;
}

// `part`'s rounds in the whole problem's terms: its sequences renamed, its ranks `first_rank` on.
std::vector<SolvedRound> renamed(const GroupSchedule& part, const std::vector<std::size_t>& sequences,
                                 int first_rank) {
  std::vector<SolvedRound> rounds = part.rounds;
  for (SolvedRound& round : rounds)
    for (GroupInRound& group : round.groups) {
      group.first_rank += first_rank;
      for (std::size_t& s : group.sequences) s = sequences[s];
    }
  return rounds;
}

// One node's share of the sequences, scheduled on its ranks.
struct NodeShare {
  std::vector<std::size_t> sequences;
  GroupSchedule schedule;
  double seconds = 0;  // when the node ends: after the rounds wider than a node, then its own
};

// The sequences for which `wider` holds first, in rounds of the job; then each node's share of the
// rest in rounds of its own. None when the rounds wider than a node alone end after `beat_s`: the
// schedule cannot be the faster then.
std::optional<GroupSchedule> per_node_rounds(const GroupProblem& problem,
                                             const std::function<bool(std::size_t)>& wider,
                                             const std::vector<double>& cheapest,
                                             const std::vector<double>& cheapest_in_node, double beat_s);

}  // namespace

GroupSchedule solve_shard_group_rounds(const GroupProblem& problem) {
  GroupSchedule job_rounds = solve_job_rounds(problem);
  job_rounds.seconds = step_seconds(problem, job_rounds);
  const int shard = problem.shard_ranks();
  const std::size_t n = problem.tokens.size();
  const auto fits = [&](std::size_t s, std::size_t i) {
    return std::isfinite(problem.seconds[s][i]) && problem.tokens[s] <= problem.capacity_tokens[i];
  };
  const auto gpu_s = [&](std::size_t s, std::size_t i) { return problem.degrees[i] * problem.seconds[s][i]; };
  constexpr double kNone = std::numeric_limits<double>::infinity();

  // Each sequence's fewest GPU-seconds, anywhere and inside a node, and its fastest time inside a node.
  std::vector<double> cheapest(n, kNone), cheapest_in_node(n, kNone), fastest_in_node(n, kNone);
  std::vector<bool> wide_cheapest(n, false);
  double step_gpu_s = 0;
  for (std::size_t s = 0; s < n; ++s) {
    for (std::size_t i = 0; i < problem.degrees.size(); ++i) {
      if (!fits(s, i)) continue;
      if (gpu_s(s, i) < cheapest[s]) {
        cheapest[s] = gpu_s(s, i);
        wide_cheapest[s] = problem.degrees[i] > shard;
      }
      if (problem.degrees[i] > shard) continue;
      cheapest_in_node[s] = std::min(cheapest_in_node[s], gpu_s(s, i));
      fastest_in_node[s] =
          std::min(fastest_in_node[s], problem.micro_batch_fixed_s(i) + problem.seconds[s][i]);
    }
    if (std::isfinite(cheapest[s])) step_gpu_s += cheapest[s];
  }
  // A rank's share of the step, at best: a sequence that alone outlasts it inside a node holds its node
  // back, so it may run wider (both are tried).
  const double share_s = step_gpu_s / problem.job;
  GroupSchedule best = std::move(job_rounds);
  for (const bool long_ones_wide : {false, true}) {
    std::optional<GroupSchedule> schedule = per_node_rounds(
        problem,
        [&](std::size_t s) {
          return wide_cheapest[s] || !std::isfinite(cheapest_in_node[s]) ||
                 (long_ones_wide && fastest_in_node[s] > share_s);
        },
        cheapest, cheapest_in_node, best.seconds);
    if (schedule && schedule->seconds < best.seconds) {
      schedule->lower_bound_s = best.lower_bound_s;
      best = std::move(*schedule);
    }
  }
  return best;
}

namespace {

std::optional<GroupSchedule> per_node_rounds(const GroupProblem& problem,
                                             const std::function<bool(std::size_t)>& wider,
                                             const std::vector<double>& cheapest,
                                             const std::vector<double>& cheapest_in_node, double beat_s) {
  const int shard = problem.shard_ranks();
  const std::size_t n = problem.tokens.size(), nodes = static_cast<std::size_t>(problem.job / shard);
  std::vector<std::size_t> wide, local;
  for (std::size_t s = 0; s < n; ++s) {
    if (!std::isfinite(cheapest[s])) continue;  // fits nowhere: left out below
    (wider(s) ? wide : local).push_back(s);
  }

  GroupSchedule schedule;
  for (std::size_t s = 0; s < n; ++s)
    if (!std::isfinite(cheapest[s])) schedule.unplaced.push_back(s);
  if (!wide.empty())
    schedule.rounds = renamed(solve_job_rounds(sub_problem(problem, wide, problem.job)), wide, 0);
  const std::vector<double> wide_ends = shard_group_seconds(problem, schedule);
  if (*std::max_element(wide_ends.begin(), wide_ends.end()) + problem.step_s >= beat_s) return std::nullopt;

  // Longest first to the node that would end first, by GPU-seconds inside a node.
  std::sort(local.begin(), local.end(),
            [&](std::size_t a, std::size_t b) { return cheapest_in_node[a] > cheapest_in_node[b]; });
  std::vector<NodeShare> shares(nodes);
  // Ties (sequences whose work the round's fixed costs cover: priced at none) go by tokens.
  std::vector<std::pair<double, int64_t>> loads;
  for (const double end : wide_ends) loads.emplace_back(end, 0);
  for (const std::size_t s : local) {
    const auto node = static_cast<std::size_t>(std::min_element(loads.begin(), loads.end()) - loads.begin());
    shares[node].sequences.push_back(s);
    loads[node].first += cheapest_in_node[s] / shard;
    loads[node].second += problem.tokens[s];
  }
  const auto solve_node = [&](std::size_t node) {
    NodeShare& share = shares[node];
    share.schedule = solve_job_rounds(sub_problem(problem, share.sequences, shard));
    share.seconds = wide_ends[node] + share.schedule.seconds;
  };
  for (std::size_t node = 0; node < nodes; ++node) solve_node(node);

  // Single sequences from the slowest node to the one that ends first, while that shortens the step.
  const auto ends_first = [&](bool last) {
    const auto by_end = [](const NodeShare& a, const NodeShare& b) { return a.seconds < b.seconds; };
    return static_cast<std::size_t>((last ? std::max_element(shares.begin(), shares.end(), by_end)
                                          : std::min_element(shares.begin(), shares.end(), by_end)) -
                                    shares.begin());
  };
  for (std::size_t tries = 0; nodes > 1 && tries < kTriesPerNode * nodes;) {
    const std::size_t from = ends_first(true), to = ends_first(false);
    const double gap = shares[from].seconds - shares[to].seconds;
    std::vector<std::size_t> candidates;  // indices into shares[from].sequences, longest first
    for (std::size_t k = 0; k < shares[from].sequences.size(); ++k)
      if (cheapest_in_node[shares[from].sequences[k]] / shard < gap) candidates.push_back(k);
    if (candidates.size() > kCandidatesPerMove) candidates.resize(kCandidatesPerMove);
    bool moved = false;
    const NodeShare was_from = shares[from], was_to = shares[to];
    for (const std::size_t k : candidates) {
      ++tries;
      const std::size_t s = was_from.sequences[k];
      shares[from].sequences.erase(shares[from].sequences.begin() + static_cast<std::ptrdiff_t>(k));
      shares[to].sequences.push_back(s);
      solve_node(from);
      solve_node(to);
      if (std::max(shares[from].seconds, shares[to].seconds) < was_from.seconds * (1 - 1e-9)) {
        moved = true;
        break;
      }
      shares[from] = was_from;
      shares[to] = was_to;
    }
    if (!moved) break;
  }

  // Round k of the nodes' own: each node's k-th round, side by side.
  std::size_t own_rounds = 0;
  for (const NodeShare& share : shares) own_rounds = std::max(own_rounds, share.schedule.rounds.size());
  const std::size_t wide_rounds = schedule.rounds.size();
  schedule.rounds.resize(wide_rounds + own_rounds);
  for (std::size_t node = 0; node < nodes; ++node) {
    const NodeShare& share = shares[node];
    for (const std::size_t s : share.schedule.unplaced) schedule.unplaced.push_back(share.sequences[s]);
    const std::vector<SolvedRound> own =
        renamed(share.schedule, share.sequences, static_cast<int>(node) * shard);
    for (std::size_t k = 0; k < own.size(); ++k) {
      SolvedRound& round = schedule.rounds[wide_rounds + k];
      round.groups.insert(round.groups.end(), own[k].groups.begin(), own[k].groups.end());
      round.seconds = std::max(round.seconds, own[k].seconds);
    }
  }
  std::sort(schedule.unplaced.begin(), schedule.unplaced.end());
  schedule.seconds = step_seconds(problem, schedule);
  return schedule;
}

}  // namespace

}  // namespace paradyse::selector
