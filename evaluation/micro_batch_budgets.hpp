// The micro-batch budgets at which a packed compare runs its static policies again (tuned_statics.hpp),
// and how such a run is named.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace paradyse::evaluation {

// "128K", "1M" (binary units, when exact), else the count: 1000.
std::string budget_text(int64_t tokens);
// "static:ulysses_z@512K": `policy` at micro-batches of `budget_tokens`.
std::string budget_variant_name(const std::string& policy, int64_t budget_tokens);
// The inverse: {"static:ulysses_z", 524288}; a name that is no budget variant, with budget 0.
struct BudgetVariant {
  std::string policy;
  int64_t budget_tokens = 0;
};
BudgetVariant split_budget_variant(const std::string& name);

// "32K,128K,512K", the budgets to search, ascending: InputError naming `flag` unless each is a length
// (parse_length) between `quantum` (a document's padding) and the global batch, and none is given
// twice. The run's own budget, if listed, is left out (its statics run anyway). Empty text: none.
std::vector<int64_t> parse_budgets(const std::string& text, const std::string& flag, int64_t run_budget,
                                   int64_t global_batch_tokens, int64_t quantum);

}  // namespace paradyse::evaluation
