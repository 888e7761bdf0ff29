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

struct TrainingSchedule {
  // Each micro-batch's documents (lengths before padding), in run order: step by step.
  std::vector<std::vector<int64_t>> micro_batches;
  std::vector<int64_t> step_of;  // per micro-batch, the index of its step
  int64_t steps = 0;
};

// One sequence per micro-batch, `global_batch` consecutive sequences a step (the paper's setup when 1).
TrainingSchedule unpacked_steps(const std::vector<int64_t>& lengths, int64_t global_batch);

// Global batches of `options.global_batch_tokens`, packed. InputError naming the flag when a budget is
// below the quantum or a sequence alone exceeds the global batch.
TrainingSchedule packed_steps(const std::vector<int64_t>& lengths, const PackingOptions& options);

}  // namespace paradyse::traces
