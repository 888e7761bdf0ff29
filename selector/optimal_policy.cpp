#include "selector/optimal_policy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "common/errors.hpp"

namespace paradyse::selector {

using steps::CostTable;

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The memory windows of one table, in activation bytes before fragmentation.
struct Windows {
  std::vector<double> layer;  // per candidate: most bytes kept before a layer of it; < 0: never fits
  double head = 0;            // most bytes kept by all layers
};

Windows memory_windows(const CostTable& table) {
  const steps::StepCost& step = table.step;
  const double budget = (step.capacity_bytes - step.static_bytes) / (1 + step.fragmentation);
  const double base = step.initial_bytes + step.embedding_forward.delta_bytes;
  const double carry = step.head.delta_bytes;  // what the head leaves for the backward (d_x)
  Windows windows;
  windows.head = budget - base - step.head.peak_bytes;
  for (const steps::Candidate& candidate : table.candidates) {
    const steps::LayerCost& layer = candidate.layer;
    PARADYSE_CHECK(layer.backward.delta_bytes == -layer.forward.delta_bytes &&
                       layer.optimizer.delta_bytes == 0 && layer.saved_bytes() >= 0,
                   candidate.name() + ": a layer's backward must free what its forward kept");
    const double optimizer_level = base + carry + step.embedding_backward.delta_bytes;
    const bool optimizer_fits = optimizer_level + layer.optimizer.peak_bytes <= budget;
    windows.layer.push_back(
        optimizer_fits
            ? budget - base -
                  std::max(layer.forward.peak_bytes, carry + layer.saved_bytes() + layer.backward.peak_bytes)
            : -1);
  }
  return windows;
}

class Search {
 public:
  Search(const CostTable& table, const Windows& windows, double max_compositions)
      : table_(table), windows_(windows), max_compositions_(max_compositions) {
    for (int a = 0; a < candidates(); ++a)
      for (int b = 0; b < candidates(); ++b) switch_free_ = switch_free_ && table.switch_s(a, b) == 0;
    for (int c = 0; c < candidates(); ++c)
      if (window(c) >= 0 && !dominated(c)) usable_.push_back(c);
    // The order in which a multiset of layers fits if it fits at all (see the header).
    std::sort(usable_.begin(), usable_.end(),
              [&](int x, int y) { return window(x) + kept(x) < window(y) + kept(y); });
    for (int c : usable_) admitting_.push_back(window(c));
    std::sort(admitting_.begin(), admitting_.end());
    admitting_.erase(std::unique(admitting_.begin(), admitting_.end()), admitting_.end());
  }

  std::optional<CostTable::Choice> run() {
    if (usable_.empty()) return std::nullopt;
    if (switch_free_ && compositions() <= max_compositions_) {
      build_envelopes(usable_.size());  // the count search bounds with the candidates left to count
      return by_counts();
    }
    build_envelopes(1);  // the label search, with every candidate at every layer
    return by_labels();
  }
  int evaluated() const { return evaluated_; }

 private:
  int candidates() const { return static_cast<int>(table_.candidates.size()); }
  const steps::LayerCost& layer(int c) const { return table_.candidates[static_cast<std::size_t>(c)].layer; }
  double seconds(int c) const { return layer(c).seconds; }
  double kept(int c) const { return layer(c).saved_bytes(); }
  double window(int c) const { return windows_.layer[static_cast<std::size_t>(c)]; }

  // No faster, keeping no less, in no wider a window than another: never needed without switch costs.
  bool dominated(int c) const {
    if (!switch_free_) return false;
    for (int d = 0; d < candidates(); ++d) {
      if (d == c) continue;
      const bool no_worse = seconds(d) <= seconds(c) && kept(d) <= kept(c) && window(d) >= window(c);
      const bool better = seconds(d) < seconds(c) || kept(d) < kept(c) || window(d) > window(c);
      if (no_worse && (better || d < c)) return true;
    }
    return false;
  }

  // C(L + k − 1, k − 1): the ways to split L layers among k candidates.
  double compositions() const {
    const double k = static_cast<double>(usable_.size());
    double ways = 1;
    for (double i = 1; i < k; ++i) ways = ways * (table_.num_layers + i) / i;
    return ways;
  }

  // (kept bytes, seconds) of one layer, kept increasing and seconds decreasing: the lower convex
  // envelope of `admitted`, from the leanest candidate to the fastest.
  using Envelope = std::vector<std::pair<double, double>>;
  Envelope envelope(std::vector<int> admitted) const {
    std::sort(admitted.begin(), admitted.end(),
              [&](int a, int b) { return kept(a) != kept(b) ? kept(a) < kept(b) : seconds(a) < seconds(b); });
    Envelope hull;
    for (int c : admitted) {
      const std::pair<double, double> point{kept(c), seconds(c)};
      if (!hull.empty() && point.second >= hull.back().second) continue;  // a leaner one is no slower
      // Drop the last point while it lies on or above the line from the one before it to this one.
      while (hull.size() >= 2) {
        const auto& [k0, s0] = hull[hull.size() - 2];
        const auto& [k1, s1] = hull.back();
        if ((k1 - k0) * (point.second - s0) - (s1 - s0) * (point.first - k0) > 0) break;
        hull.pop_back();
      }
      hull.push_back(point);
    }
    return hull;
  }

  // A prefix admits the candidates whose windows hold it: one envelope per distinct window, for the
  // candidates from each of the first `froms` places in window order on.
  void build_envelopes(std::size_t froms) {
    envelopes_.resize(froms * admitting_.size());
    for (std::size_t from = 0; from < froms; ++from)
      for (std::size_t w = 0; w < admitting_.size(); ++w) {
        std::vector<int> admitted;
        for (std::size_t k = from; k < usable_.size(); ++k)
          if (window(usable_[k]) >= admitting_[w]) admitted.push_back(usable_[k]);
        envelopes_[from * admitting_.size() + w] = envelope(std::move(admitted));
      }
  }

  // Least seconds of `count` more layers keeping at most `left` bytes, of the usable candidates from
  // place `from` in window order on, relaxed to fractional counts and ignoring the windows but for
  // admitting `prefix`. A linear program of two constraints (the count, the bytes) has an optimum of
  // at most two candidates: the point of the admitted candidates' envelope at `left / count` bytes a
  // layer, or its fastest end when that fits.
  double relaxed_s(std::size_t from, double prefix, double count, double left) const {
    const auto admits = std::lower_bound(admitting_.begin(), admitting_.end(), prefix);
    if (admits == admitting_.end() || from >= usable_.size()) return kInfinity;
    PARADYSE_CHECK(from * admitting_.size() < envelopes_.size(),
                   "the relaxation's envelopes from this place");
    const Envelope& hull =
        envelopes_[from * admitting_.size() + static_cast<std::size_t>(admits - admitting_.begin())];
    const double per_layer = left / count;
    if (hull.empty() || per_layer < hull.front().first) return kInfinity;
    std::size_t i = 0;
    while (i + 1 < hull.size() && hull[i + 1].first <= per_layer) ++i;
    if (i + 1 == hull.size()) return count * hull.back().second;
    const auto& [k0, s0] = hull[i];
    const auto& [k1, s1] = hull[i + 1];
    return count * (s0 + (s1 - s0) * (per_layer - k0) / (k1 - k0));
  }

  // The seconds of `counts` (per candidate, in window order) if the layers fit so, else infinity;
  // summed as by_counts sums them.
  double fitting_s(const std::vector<int>& counts) const {
    double prefix = 0, time = 0;
    for (std::size_t k = 0; k < usable_.size(); ++k) {
      const int c = usable_[k], n = counts[k];
      if (n > 0 && prefix + (n - 1) * kept(c) > window(c)) return kInfinity;
      prefix += n * kept(c);
      time += n * seconds(c);
    }
    return prefix > windows_.head ? kInfinity : time;
  }

  // A first plan for the search to beat: for every pair of candidates, as many layers of the first as
  // the head's window leaves room for beside the second's (the relaxation's mix, rounded down).
  std::pair<double, std::vector<int>> incumbent() const {
    std::pair<double, std::vector<int>> best{kInfinity, {}};
    const int layers = table_.num_layers;
    for (std::size_t i = 0; i < usable_.size(); ++i)
      for (std::size_t j = 0; j < usable_.size(); ++j) {
        const double a = kept(usable_[i]), b = kept(usable_[j]);
        const double room = windows_.head - layers * b;
        int of_i = i == j ? layers : a > b ? static_cast<int>(std::floor(room / (a - b))) : layers;
        of_i = std::clamp(of_i, 0, layers);
        std::vector<int> counts(usable_.size(), 0);
        counts[i] += of_i;
        counts[j] += layers - of_i;
        const double time = fitting_s(counts);
        if (time < best.first) best = {time, counts};
      }
    return best;
  }

  // Counts per candidate, in window order, best first (branch and bound on the relaxation, from the
  // incumbent above).
  std::optional<CostTable::Choice> by_counts() {
    std::vector<int> counts(usable_.size());
    std::pair<double, std::vector<int>> start = incumbent();
    double best = start.first;  // not a structured binding: the lambda below captures it
    std::vector<int> best_counts = std::move(start.second);
    const int layers = table_.num_layers;
    const auto visit = [&](auto&& self, std::size_t k, int used, double prefix, double time) -> void {
      const int c = usable_[k];
      const bool last = k + 1 == usable_.size();
      const int most = layers - used;  // the last candidate takes all layers left
      for (int n = most; n >= (last ? most : 0); --n) {
        if (n > 0 && prefix + (n - 1) * kept(c) > window(c)) continue;
        const double next_prefix = prefix + n * kept(c), next_time = time + n * seconds(c);
        const int next_used = used + n;
        ++evaluated_;
        if (next_prefix > windows_.head) continue;
        if (next_used == layers) {
          if (next_time < best) {
            best = next_time;
            counts[k] = n;
            std::fill(counts.begin() + static_cast<std::ptrdiff_t>(k) + 1, counts.end(), 0);
            best_counts = counts;
          }
          continue;
        }
        if (last) continue;
        if (next_time + relaxed_s(k + 1, next_prefix, layers - next_used, windows_.head - next_prefix) >=
            best)
          continue;
        counts[k] = n;
        self(self, k + 1, next_used, next_prefix, next_time);
      }
    };
    visit(visit, 0, 0, 0.0, 0.0);
    if (best_counts.empty()) return std::nullopt;
    CostTable::Choice choice;
    for (std::size_t k = 0; k < usable_.size(); ++k)
      choice.insert(choice.end(), static_cast<std::size_t>(best_counts[k]), usable_[k]);
    return choice;
  }

  struct Label {
    double seconds = 0;
    double kept = 0;
    int parent = -1;  // index in the previous layer's labels
    int candidate = -1;
  };

  // Keeps, per bucket (the last candidate, with switch costs), the labels no other label beats on
  // both seconds and kept bytes.
  std::vector<Label> pareto(std::vector<Label> labels) const {
    const bool by_candidate = !switch_free_;
    std::sort(labels.begin(), labels.end(), [&](const Label& a, const Label& b) {
      if (by_candidate && a.candidate != b.candidate) return a.candidate < b.candidate;
      return a.kept != b.kept ? a.kept < b.kept : a.seconds < b.seconds;
    });
    std::vector<Label> front;
    double best = kInfinity;
    int bucket = -2;
    for (const Label& label : labels) {
      if ((by_candidate ? label.candidate : 0) != bucket) {
        bucket = by_candidate ? label.candidate : 0;
        best = kInfinity;
      }
      if (label.seconds < best) {
        front.push_back(label);
        best = label.seconds;
      }
    }
    return front;
  }

  std::optional<CostTable::Choice> by_labels() {
    const int layers = table_.num_layers;
    std::vector<std::vector<Label>> done;
    std::vector<Label> front{Label{}};
    for (int l = 0; l < layers && !front.empty(); ++l) {
      const double remaining = layers - l - 1;
      std::vector<Label> next;
      for (int i = 0; i < static_cast<int>(front.size()); ++i) {
        const Label& label = front[static_cast<std::size_t>(i)];
        for (int c : usable_) {
          if (label.kept > window(c)) continue;
          const double switch_cost = l > 0 ? table_.switch_s(label.candidate, c) : 0;
          const Label extended{label.seconds + seconds(c) + switch_cost, label.kept + kept(c), i, c};
          ++evaluated_;
          if (extended.kept > windows_.head) continue;
          if (remaining > 0 &&
              extended.seconds + relaxed_s(0, extended.kept, remaining, windows_.head - extended.kept) ==
                  kInfinity)
            continue;
          next.push_back(extended);
        }
      }
      done.push_back(std::move(front));
      front = pareto(std::move(next));
    }
    if (static_cast<int>(done.size()) < layers || front.empty()) return std::nullopt;
    const auto fastest = std::min_element(
        front.begin(), front.end(), [](const Label& a, const Label& b) { return a.seconds < b.seconds; });
    CostTable::Choice choice(static_cast<std::size_t>(layers));
    int index = static_cast<int>(fastest - front.begin());
    const std::vector<Label>* labels = &front;
    for (int l = layers - 1; l >= 0; --l) {
      const Label& label = (*labels)[static_cast<std::size_t>(index)];
      choice[static_cast<std::size_t>(l)] = label.candidate;
      index = label.parent;
      labels = &done[static_cast<std::size_t>(l)];
    }
    if (switch_free_) {
      // The same layers grouped in window order: it fits too, with the fewest switches.
      std::vector<int> rank(static_cast<std::size_t>(candidates()));
      for (std::size_t k = 0; k < usable_.size(); ++k)
        rank[static_cast<std::size_t>(usable_[k])] = static_cast<int>(k);
      std::stable_sort(choice.begin(), choice.end(), [&](int a, int b) {
        return rank[static_cast<std::size_t>(a)] < rank[static_cast<std::size_t>(b)];
      });
    }
    return choice;
  }

  const CostTable& table_;
  const Windows& windows_;
  double max_compositions_;
  bool switch_free_ = true;
  std::vector<int> usable_;
  std::vector<double> admitting_;  // the usable candidates' distinct windows, increasing
  // Per usable place in window order (as built), then per window above: of the candidates from that
  // place on whose windows are at least that window.
  std::vector<Envelope> envelopes_;
  int evaluated_ = 0;
};

}  // namespace

OptimalPolicy::OptimalPolicy(CostSource& source, OptimalOptions options)
    : source_(source),
      name_(options.two_d ? "optimal-2d" : "optimal"),
      max_compositions_(options.max_compositions) {
  for (const CandidateKey& key : all_candidates(options.recompute_choices, options.two_d))
    if (std::find(options.excluded.begin(), options.excluded.end(), key.first) == options.excluded.end())
      candidates_.push_back(key);
}

Decision OptimalPolicy::decide(const MicroBatch& micro_batch) {
  return decide(source_.table(micro_batch, candidates_));
}

Decision OptimalPolicy::decide(const CostTable& table) const {
  const Windows windows = memory_windows(table);
  Search search(table, windows, max_compositions_);
  const std::optional<CostTable::Choice> choice = search.run();
  Decision decision;
  if (choice) decision = priced_decision(name_, table, *choice);
  // Nothing fits (or the phases every plan shares do not): the leanest strategy, as paradyse does.
  if ((!choice || !decision.fits) && !table.candidates.empty()) {
    decision = priced_decision(name_, table, uniform_choice(table, leanest_candidate(table)));
    decision.fallback = true;
  }
  decision.policy = name_;
  decision.tokens = table.tokens;
  decision.padded_tokens = table.padded_tokens;
  decision.evaluated_plans = search.evaluated();
  return decision;
}

}  // namespace paradyse::selector
