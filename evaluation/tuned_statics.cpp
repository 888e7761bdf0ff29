#include "evaluation/tuned_statics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace paradyse::evaluation {

namespace {

// A team tuning a static keeps the tokens first: more trained tokens, then more tokens/s.
bool trains_more_then_faster(const PolicyResult& a, const PolicyResult& b) {
  return a.trained_tokens > b.trained_tokens ||
         (a.trained_tokens == b.trained_tokens && a.tokens_per_second > b.tokens_per_second);
}

}  // namespace

std::vector<TunedStatic> tuned_statics(const CompareResult& result, int64_t run_budget) {
  std::map<std::string, TunedStatic> by_policy;
  for (const PolicyResult& p : result.policies) {
    if (!p.policy.starts_with("static:")) continue;
    const auto [policy, budget] = split_budget_variant(p.policy);
    TunedStatic& tuned = by_policy[policy];
    tuned.policy = policy;
    tuned.budgets.emplace_back(budget == 0 ? run_budget : budget, &p);
  }
  std::vector<TunedStatic> out;
  for (auto& [policy, tuned] : by_policy) {
    if (tuned.budgets.size() < 2) continue;  // run at the run's budget only
    std::sort(tuned.budgets.begin(), tuned.budgets.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 1; i < tuned.budgets.size(); ++i)
      if (trains_more_then_faster(*tuned.budgets[i].second, tuned.result())) tuned.chosen = i;
    out.push_back(std::move(tuned));
  }
  return out;
}

namespace {

const PolicyResult* fastest_of(const std::vector<TunedStatic>& tuned) {
  const PolicyResult* fastest = nullptr;
  for (const TunedStatic& t : tuned)
    if (fastest == nullptr || t.result().tokens_per_second > fastest->tokens_per_second)
      fastest = &t.result();
  return fastest;
}

std::vector<Speedup> speedups_over(const CompareResult& result, const std::vector<TunedStatic>& tuned) {
  if (tuned.empty()) return {};
  const PolicyResult* most_tuned = nullptr;
  for (const TunedStatic& t : tuned)
    if (most_tuned == nullptr || trains_more_then_faster(t.result(), *most_tuned)) most_tuned = &t.result();
  // Each baseline once, with every role it plays.
  std::vector<std::pair<const PolicyResult*, std::string>> baselines;
  const auto add = [&](const PolicyResult* baseline, const std::string& role) {
    if (baseline == nullptr) return;
    for (auto& [known, roles] : baselines)
      if (known == baseline) {
        roles += "; " + role;
        return;
      }
    baselines.emplace_back(baseline, role);
  };
  add(fastest_static(result), "the fastest static at the run's budget");
  add(fastest_of(tuned), "the fastest tuned static");
  add(most_tuned, "the tuned static that trains the most");
  std::vector<Speedup> out;
  for (const PolicyResult& p : result.policies) {
    if (p.policy.starts_with("static:") || p.trained == 0) continue;
    for (const auto& [baseline, role] : baselines) out.push_back(speedup(result, p, *baseline, role));
  }
  return out;
}

}  // namespace

const PolicyResult* fastest_tuned_static(const CompareResult& result, int64_t run_budget) {
  return fastest_of(tuned_statics(result, run_budget));
}

std::vector<Speedup> tuned_speedups(const CompareResult& result, int64_t run_budget) {
  return speedups_over(result, tuned_statics(result, run_budget));
}

std::string tuned_statics_text(const CompareResult& result, int64_t run_budget) {
  const std::vector<TunedStatic> tuned = tuned_statics(result, run_budget);
  if (tuned.empty()) return "";
  std::string text =
      "Statics at each micro-batch budget: tokens/s (tokens left out of memory); * the tuned one\n";
  std::size_t width = 0;
  for (const TunedStatic& t : tuned) width = std::max(width, t.policy.size());
  for (const TunedStatic& t : tuned) {
    text += fmt::format("  {:<{}}", t.policy, width + 1);
    for (std::size_t i = 0; i < t.budgets.size(); ++i) {
      const auto& [budget, p] = t.budgets[i];
      text += fmt::format(" {:>5}{} {:.0f} ({:.0f})", budget_text(budget), i == t.chosen ? "*" : ":",
                          p->tokens_per_second, p->oom_tokens);
    }
    text += "\n";
  }
  return text + speedups_text(speedups_over(result, tuned));
}

nlohmann::json tuned_statics_json(const CompareResult& result, int64_t run_budget) {
  const std::vector<TunedStatic> tuned = tuned_statics(result, run_budget);
  if (tuned.empty()) return nullptr;
  nlohmann::json j = {{"statics", nlohmann::json::array()}, {"speedups", speedups_over(result, tuned)}};
  for (const TunedStatic& t : tuned) {
    nlohmann::json budgets = nlohmann::json::array();
    for (const auto& [budget, p] : t.budgets)
      budgets.push_back({{"budget_tokens", budget},
                         {"policy", p->policy},
                         {"tokens_per_s", p->tokens_per_second},
                         {"oom_tokens", p->oom_tokens}});
    j["statics"].push_back({{"policy", t.policy},
                            {"budget_tokens", t.budget_tokens()},
                            {"tokens_per_s", t.result().tokens_per_second},
                            {"oom_tokens", t.result().oom_tokens},
                            {"budgets", budgets}});
  }
  return j;
}

}  // namespace paradyse::evaluation
