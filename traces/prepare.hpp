// Turning a trace into what a run trains: a sample of it, its first N samples, a stated rule for lengths
// over the trainable maximum (drop, truncate or split, never silently), and an order. Everything it
// changed is counted and said in one sentence, so that reports state what was actually run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "traces/trace.hpp"

namespace paradyse::traces {

enum class Order { dataset, sorted, shuffled };
enum class OverRule { drop, truncate, split };

struct PrepareOptions {
  Order order = Order::dataset;
  uint64_t seed = 0;               // for sampling and shuffling, through std::mt19937_64
  int64_t max_len = 0;             // 0: no cap
  OverRule over = OverRule::drop;  // what happens to samples longer than max_len
  double sample = 1.0;             // keep each sample with this probability, in (0, 1]
  int64_t limit = 0;               // 0: all; else the first `limit` samples after sampling, in dataset order
};

struct PreparedTrace {
  std::vector<int64_t> lengths;  // what a run trains, in run order
  int64_t over_max = 0;          // samples longer than max_len
  int64_t dropped = 0;           // of them, dropped
  int64_t truncated = 0;         // of them, truncated to max_len
  int64_t split_pieces = 0;      // the pieces (each at most max_len) that the split ones became
  std::string description;       // one sentence saying all of the above and the order, for reports
};

// In this order: sample, then limit, then the rule for lengths over max_len, then the order. Sampling
// first makes `limit` count kept samples; capping after the limit makes the counts describe the samples
// run; ordering last means sorted and shuffled orders apply to split pieces too. The same trace, options
// and seed give the same result on every platform (the draws use only the engine's raw output, whose
// sequence the standard fixes, not std::*_distribution, whose algorithms it leaves open).
// InputError naming the flag (--sample, --limit, --max-len) for an option out of range, or when nothing
// is left to train.
PreparedTrace prepare(const Trace& trace, const PrepareOptions& options);

// "dataset", "sorted" (short to long) or "shuffled"; an InputError naming --order otherwise.
Order parse_order(const std::string& text);
// "drop", "truncate" or "split"; an InputError naming --over otherwise.
OverRule parse_over_rule(const std::string& text);

}  // namespace paradyse::traces
