// The longest sequence a policy can train within memory: bisection over lengths, since a plan that
// fits a length fits every shorter one (activations only grow with the sequence).
#pragma once

#include <cstdint>

#include "selector/policy.hpp"

namespace paradyse::selector {

struct LongestLength {
  int64_t tokens = 0;  // 0 when not even one token fits
  Decision decision;   // the policy's decision at `tokens`
};

// Bisection over 1 … max_tokens; the policy decides at about log2(max_tokens) lengths.
LongestLength longest_length(Policy& policy, int64_t max_tokens);

}  // namespace paradyse::selector
