#include "selector/longest_length.hpp"

namespace paradyse::selector {

LongestLength longest_length(Policy& policy, int64_t max_tokens) {
  LongestLength longest;
  int64_t fails =
      max_tokens + 1;  // invariant: longest.tokens fits (or is 0), fails does not (or is past the end)
  while (fails - longest.tokens > 1) {
    const int64_t middle = longest.tokens + (fails - longest.tokens) / 2;
    Decision decision = policy.decide(middle);
    if (decision.fits) {
      longest.tokens = middle;
      longest.decision = std::move(decision);
    } else {
      fails = middle;
    }
  }
  return longest;
}

}  // namespace paradyse::selector
