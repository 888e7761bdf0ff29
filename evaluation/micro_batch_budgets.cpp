#include "evaluation/micro_batch_budgets.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/errors.hpp"
#include "evaluation/options.hpp"

namespace paradyse::evaluation {

std::string budget_text(int64_t tokens) {
  if (tokens >= (int64_t{1} << 20) && tokens % (int64_t{1} << 20) == 0)
    return fmt::format("{}M", tokens >> 20);
  if (tokens >= 1024 && tokens % 1024 == 0) return fmt::format("{}K", tokens >> 10);
  return std::to_string(tokens);
}

namespace {
constexpr char kBudgetMark = '@';
}  // namespace

std::string budget_variant_name(const std::string& policy, int64_t budget_tokens) {
  return policy + kBudgetMark + budget_text(budget_tokens);
}

BudgetVariant split_budget_variant(const std::string& name) {
  const std::size_t mark = name.find(kBudgetMark);
  if (mark == std::string::npos) return {name, 0};
  return {name.substr(0, mark), parse_length(name.substr(mark + 1), "a policy's budget")};
}

std::vector<int64_t> parse_budgets(const std::string& text, const std::string& flag, int64_t run_budget,
                                   int64_t global_batch_tokens, int64_t quantum) {
  if (text.empty()) return {};
  std::vector<int64_t> out, seen;
  for (const int64_t budget : parse_lengths(text, flag)) {
    if (budget < quantum || budget > global_batch_tokens)
      throw InputError(
          flag, 0, "",
          fmt::format("expected micro-batch budgets between {} tokens (a document's padding) and "
                      "the global batch's {}, got {}",
                      quantum, global_batch_tokens, budget));
    if (std::find(seen.begin(), seen.end(), budget) != seen.end())
      throw InputError(flag, 0, "", fmt::format("the budget {} is given twice", budget_text(budget)));
    seen.push_back(budget);
    if (budget != run_budget) out.push_back(budget);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace paradyse::evaluation
