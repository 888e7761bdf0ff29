// Turning a trace into what a run trains: a sample of it, its first N samples, a stated rule for lengths
// over the trainable maximum (drop, truncate or split, never silently), and an order. Everything it
// changed is counted and said in one sentence, so that reports state what was actually run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
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

// A run's lengths prepared from a trace as prepare() below says, a pass at a time, so that a trace of
// any length runs in memory that does not grow with it: constructing it reads the trace once (every
// check, every count, the description), for_each reads it again in run order. Dataset order holds
// nothing; sorted order holds a count per distinct length; shuffled order holds the run's lengths, four
// bytes each.
class PreparedLengths {
 public:
  PreparedLengths(std::shared_ptr<const TraceSource> source, const PrepareOptions& options);
  // Every length of the run, in run order.
  void for_each(const std::function<void(int64_t)>& length) const;
  std::vector<int64_t> lengths() const;  // all of them, in memory
  int64_t sequences() const { return sequences_; }
  int64_t tokens() const { return tokens_; }
  int64_t over_max() const { return over_max_; }
  int64_t dropped() const { return dropped_; }
  int64_t truncated() const { return truncated_; }
  int64_t split_pieces() const { return split_pieces_; }
  const std::string& description() const { return description_; }
  const TraceSource& source() const { return *source_; }

 private:
  // Each sample the run keeps (sampled with `engine`'s draws, then limited), in dataset order, to `kept`;
  // returns how many sampling kept. With `whole_trace` it reads on past the limit while it samples,
  // counting what sampling keeps and drawing for every sample, as the shuffle after it expects.
  int64_t walk(std::mt19937_64& engine, bool whole_trace, const std::function<void(int64_t)>& kept) const;
  // A kept sample's pieces under the cap rule, to `piece`.
  void cap(int64_t length, const std::function<void(int64_t)>& piece) const;
  std::shared_ptr<const TraceSource> source_;
  PrepareOptions options_;
  int64_t sequences_ = 0, tokens_ = 0;
  int64_t over_max_ = 0, dropped_ = 0, truncated_ = 0, split_pieces_ = 0;
  std::map<int64_t, int64_t> sorted_counts_;  // sorted order: sequences per length
  std::vector<int32_t> shuffled_;             // shuffled order
  std::string description_;
};

// In this order: sample, then limit, then the rule for lengths over max_len, then the order. Sampling
// first makes `limit` count kept samples; capping after the limit makes the counts describe the samples
// run; ordering last means sorted and shuffled orders apply to split pieces too. The same trace, options
// and seed give the same result on every platform (the draws use only the engine's raw output, whose
// sequence the standard fixes, not std::*_distribution, whose algorithms it leaves open).
// InputError naming the flag (--sample, --limit, --max-len) for an option out of range, or when nothing
// is left to train.
PreparedTrace prepare(const Trace& trace, const PrepareOptions& options);  // PreparedLengths, in memory

// "dataset", "sorted" (short to long) or "shuffled"; an InputError naming --order otherwise.
Order parse_order(const std::string& text);
// "drop", "truncate" or "split"; an InputError naming --over otherwise.
OverRule parse_over_rule(const std::string& text);

}  // namespace paradyse::traces
