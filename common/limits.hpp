// The largest inputs paradyse takes, and why there is a limit at all.
#pragma once

#include <cstdint>
#include <string>

namespace paradyse {

// The longest sequence: 2^30 tokens (1,073,741,824), a hundred times the longest context models are
// trained on. Above it the sizes computed from a length (s² attention pairs, s·h activations per
// rank) approach int64's range, and a trace of such lengths describes no dataset. Every length a
// user gives (traces, --seq, --max-len, sweep axes) is checked against it.
inline constexpr int64_t kMaxSequenceTokens = int64_t{1} << 30;
// Micro-batches of one global batch: each is traced in full by the simulator.
inline constexpr int64_t kMaxMicroBatches = 1024;

// "2^30 tokens (1,073,741,824)", for error messages.
inline std::string max_sequence_tokens_text() {
  return "2^30 = 1073741824 tokens";
}

}  // namespace paradyse
