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
// Sequences one run trains (a compare, after sampling, the limit and splitting): 2^28, about 268
// million. A compare's memory does not grow with its run, but its time does: the analytic engine takes
// about a microsecond a sequence per policy, so a run this long under seven policies takes about half
// an hour; past it, a cap that splits a trace into pieces of a few tokens is more likely than a run
// anyone meant. --limit, --sample or a longer --max-len trains fewer.
inline constexpr int64_t kMaxRunSequences = int64_t{1} << 28;
// Micro-batches of one global batch: each is traced in full by the simulator.
inline constexpr int64_t kMaxMicroBatches = 1024;

// Input files are read whole (a plain-text trace is read a block at a time); a file larger than its
// bound is refused before it can take the machine's memory or time (/dev/zero given as a trace, a log
// given as a model). Settings files (models, clusters, sweep specs, published tables, profiles, fitted
// models): 64 MiB, a thousand times the largest preset.
// Traces: 4 GiB, about 400 million lengths of plain text. A trace line longer than 16 MiB holds no
// length (a JSONL line carries a sample's metadata, not its text).
inline constexpr int64_t kMaxSettingsFileBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxTraceFileBytes = int64_t{4} << 30;
inline constexpr int64_t kMaxTraceLineBytes = int64_t{16} << 20;
// The least fraction of its peak a cluster file's GEMM or attention curve may give: a thousandth. No
// kernel of a training step runs slower, and a smaller figure is a typo or a timing taken while the
// machine stalled (calibrate raises such a point to it, and says so).
inline constexpr double kLowestEfficiency = 1e-3;
// JSON nesting: no file paradyse reads nests deeper than 6; past 64 the input is not one of them, and
// nlohmann's printing and destruction of a value recurse once per level.
inline constexpr int kMaxJsonDepth = 64;

// "2^30 tokens (1,073,741,824)", for error messages.
inline std::string max_sequence_tokens_text() {
  return "2^30 = 1073741824 tokens";
}

}  // namespace paradyse
