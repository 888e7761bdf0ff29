// Training steps of a run as production trainers form them (Megatron-LM, FlexSP, WLB-LLM): the
// sequences, in run order, fill global batches of a token budget; each global batch is packed into
// micro-batches of at most a token budget, documents laid end to end (attention stays within each);
// micro-batches run one after another, gradients accumulate, the optimizer steps once per batch.
//
// Packing rule: first-fit decreasing on padded lengths, the classic bin-packing heuristic (at most
// 11/9·OPT + 6/9 micro-batches, Dósa 2007). A step's sequences, longest first, each go into the first
// micro-batch that still has room for it, or open a new one; a sequence longer than the micro-batch
// budget is a micro-batch of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace paradyse::traces {

struct PackingOptions {
  int64_t global_batch_tokens = 0;  // tokens a step holds at most (before padding)
  int64_t micro_batch_tokens = 0;   // padded tokens a micro-batch holds at most
  int64_t quantum = 1;              // a document is padded to a multiple of this (the layout's)
};

// A run's steps, or a run of whole steps of a longer one (ScheduleBuilder::take).
struct TrainingSchedule {
  // Each micro-batch's documents (lengths before padding), in run order: step by step.
  std::vector<std::vector<int64_t>> micro_batches;
  std::vector<int64_t> step_of;   // per micro-batch, the index of its step in the run
  int64_t steps = 0;              // steps here
  int64_t first_micro_batch = 0;  // the index in the run of micro_batches[0]
};

// The steps of a run built a sequence at a time, in run order, so that a long run is trained a run of
// whole steps at a time in memory that does not grow with it: the same steps as the functions below.
class ScheduleBuilder {
 public:
  // One sequence per micro-batch, `global_batch` a step.
  static ScheduleBuilder unpacked(int64_t global_batch);
  // Packed steps; InputError naming the flag when a budget is below the quantum.
  static ScheduleBuilder packed(const PackingOptions& options);
  // The next sequence. InputError naming --global-batch-tokens for a sequence longer than a packed
  // global batch (errors name a sequence by its position in the run, from 1).
  void add(int64_t tokens);
  // No more sequences: the last step is closed.
  void close();
  // Micro-batches of the steps closed and not yet taken.
  std::size_t ready() const { return ready_.micro_batches.size(); }
  // The steps closed since the last take.
  TrainingSchedule take();

 private:
  ScheduleBuilder() = default;
  void close_step();
  int64_t global_batch_ = 1;
  PackingOptions packing_{};
  bool packed_ = false;
  std::vector<int64_t> step_;  // the open step's sequences
  int64_t step_tokens_ = 0;
  int64_t sequences_ = 0;
  int64_t steps_ = 0;          // closed
  int64_t micro_batches_ = 0;  // closed
  TrainingSchedule ready_;
};

// One sequence per micro-batch, `global_batch` consecutive sequences a step (the paper's setup when 1).
TrainingSchedule unpacked_steps(const std::vector<int64_t>& lengths, int64_t global_batch);

// Global batches of `options.global_batch_tokens`, packed. InputError naming the flag when a budget is
// below the quantum or a sequence alone exceeds the global batch (ScheduleBuilder::packed, add).
TrainingSchedule packed_steps(const std::vector<int64_t>& lengths, const PackingOptions& options);

}  // namespace paradyse::traces
