#include "selector/paradyse_policy.hpp"

#include <algorithm>
#include <numeric>

namespace paradyse::selector {

using steps::CostTable;

ParadysePolicy::ParadysePolicy(CostSource& source, ParadyseOptions options)
    : source_(source), options_(std::move(options)), name_(options_.two_d ? "paradyse-2d" : "paradyse") {
  for (const Strategy* strategy : candidate_strategies(options_.two_d))
    if (std::find(options_.excluded.begin(), options_.excluded.end(), strategy) == options_.excluded.end())
      candidates_.emplace_back(strategy, Recompute::none);
}

Decision ParadysePolicy::decide(const MicroBatch& micro_batch) {
  std::vector<int64_t> documents = micro_batch.documents;  // what the cost depends on; order does not matter
  std::sort(documents.begin(), documents.end());
  const auto key = std::make_pair(source_.batch(), std::move(documents));
  if (options_.cache) {
    if (auto found = cache_.find(key); found != cache_.end()) {
      Decision decision = found->second;
      decision.from_cache = true;
      decision.evaluated_plans = 0;
      previous_ = decision.plan;
      return decision;
    }
  }
  Decision decision = decide(source_.table(micro_batch, candidates_));
  if (options_.cache) cache_[key] = decision;
  return decision;
}

Decision ParadysePolicy::decide(const CostTable& table) {
  const int n = static_cast<int>(table.candidates.size());
  const int layers = table.num_layers;
  int evaluated = 0;
  std::vector<double> seconds(static_cast<std::size_t>(n)), peak(static_cast<std::size_t>(n));
  for (int c = 0; c < n; ++c) {
    const CostTable::Choice uniform = uniform_choice(table, c);
    seconds[static_cast<std::size_t>(c)] = table.plan_s(uniform);
    peak[static_cast<std::size_t>(c)] = table.plan_peak_bytes(uniform);
    ++evaluated;
  }
  const auto at = [](const std::vector<double>& v, int c) { return v[static_cast<std::size_t>(c)]; };

  std::vector<int> kept(static_cast<std::size_t>(n));
  std::iota(kept.begin(), kept.end(), 0);
  if (options_.pruning) {
    const auto dominated = [&](int c) {
      for (int d = 0; d < n; ++d) {
        const bool no_worse = at(seconds, d) <= at(seconds, c) && at(peak, d) <= at(peak, c);
        const bool better = at(seconds, d) < at(seconds, c) || at(peak, d) < at(peak, c);
        if (d != c && no_worse && (better || d < c)) return true;
      }
      return false;
    };
    std::erase_if(kept, dominated);
  }
  std::stable_sort(kept.begin(), kept.end(), [&](int a, int b) { return at(seconds, a) < at(seconds, b); });

  std::optional<CostTable::Choice> best;
  double best_s = 0;
  const auto consider = [&](const CostTable::Choice& choice, double choice_s) {
    if (!best || choice_s < best_s) {
      best = choice;
      best_s = choice_s;
    }
  };
  const double capacity = table.step.capacity_bytes;
  if (options_.early_termination && !kept.empty() && at(peak, kept.front()) <= capacity) {
    consider(uniform_choice(table, kept.front()), at(seconds, kept.front()));
  } else {
    for (int c : kept)
      if (at(peak, c) <= capacity) consider(uniform_choice(table, c), at(seconds, c));
    if (options_.mixes) {
      for (std::size_t i = 0; i < kept.size(); ++i) {
        for (std::size_t j = i + 1; j < kept.size(); ++j) {
          const int fast = kept[i], lean = kept[j];
          if (at(seconds, fast) >= at(seconds, lean)) continue;  // not a faster/leaner pair
          // m layers of the faster first, then the leaner (one switch); each m moves the time by the
          // difference of one layer.
          CostTable::Choice mix = uniform_choice(table, lean);
          double mix_s = at(seconds, lean) + table.switch_s(fast, lean);
          const double step = table.candidates[static_cast<std::size_t>(fast)].layer.seconds -
                              table.candidates[static_cast<std::size_t>(lean)].layer.seconds;
          const steps::TwoPartPeaks peaks(table, fast, lean);
          for (int m = 1; m < layers; ++m) {
            mix[static_cast<std::size_t>(m - 1)] = fast;
            mix_s += step;
            ++evaluated;
            if (peaks.peak_bytes(m) > capacity) {
              if (options_.short_circuit) break;
              continue;
            }
            consider(mix, mix_s);
          }
        }
      }
    }
  }

  Decision decision;
  if (best && options_.gamma > 0 && previous_ && previous_->size() == static_cast<std::size_t>(layers)) {
    // The previous plan, if this table can price it.
    CostTable::Choice previous;
    for (const LayerChoice& layer : *previous_)
      if (auto index = table.find(*layer.strategy, layer.recompute)) previous.push_back(*index);
    if (previous.size() == previous_->size()) {
      ++evaluated;
      if (table.fits(previous) && table.plan_s(previous) <= (1 + options_.gamma) * best_s) {
        decision = priced_decision(name_, table, previous);
        decision.kept_previous = previous != *best;
        best.reset();
      }
    }
  }
  if (best) {
    decision = priced_decision(name_, table, *best);
  } else if (decision.plan.empty() && options_.fallback && n > 0) {
    decision = priced_decision(name_, table, uniform_choice(table, leanest_candidate(table)));
    decision.fallback = true;
  } else if (decision.plan.empty()) {
    decision.policy = name_;
    decision.tokens = table.tokens;
    decision.padded_tokens = table.padded_tokens;
  }
  decision.evaluated_plans = evaluated;
  if (!decision.plan.empty()) previous_ = decision.plan;
  return decision;
}

}  // namespace paradyse::selector
