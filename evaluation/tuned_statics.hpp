// Static strategies at their best micro-batch budget. A packed compare with budgets to search runs each
// static policy again at each of them: the same global batches, packed into micro-batches of that many
// tokens, under the name "static:NAME@BUDGET". A static's tuned budget is, of the run's own and those,
// the one at which it trains the most tokens and, among those, the fastest (tokens/s): what a team
// tuning one static strategy by hand would keep. Every other policy is then compared with the fastest
// static at the run's budget, the fastest tuned static, and the tuned static that trains the most.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluation/compare_report.hpp"
#include "evaluation/compare_result.hpp"
#include "evaluation/micro_batch_budgets.hpp"

namespace paradyse::evaluation {

struct TunedStatic {
  std::string policy;  // "static:ulysses_z"
  // Every budget it ran at, ascending, with its result; `chosen` indexes its tuned one.
  std::vector<std::pair<int64_t, const PolicyResult*>> budgets;
  std::size_t chosen = 0;
  int64_t budget_tokens() const { return budgets[chosen].first; }
  const PolicyResult& result() const { return *budgets[chosen].second; }
};
// Every static of the run that ran at other budgets too, at its tuned budget; `run_budget`: the
// run's own micro-batch budget.
std::vector<TunedStatic> tuned_statics(const CompareResult& result, int64_t run_budget);

// The tuned static with the most tokens/s; null without tuned statics.
const PolicyResult* fastest_tuned_static(const CompareResult& result, int64_t run_budget);

// Every policy that is not static against the fastest static at the run's budget, the fastest tuned
// static and the tuned static that trains the most (a baseline once when these coincide, its roles
// joined). Empty without tuned statics.
std::vector<Speedup> tuned_speedups(const CompareResult& result, int64_t run_budget);

// The tuned statics (each budget's tokens/s and tokens left out of memory, the tuned one marked) and
// the speedups, for the terminal and the report; "" without tuned statics.
std::string tuned_statics_text(const CompareResult& result, int64_t run_budget);
// {"statics": [{"policy", "budget_tokens", "tokens_per_s", "oom_tokens", "budgets": [...]}],
// "speedups": [...]}; null without tuned statics.
nlohmann::json tuned_statics_json(const CompareResult& result, int64_t run_budget);

}  // namespace paradyse::evaluation
