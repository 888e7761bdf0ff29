#include "traces/packing.hpp"

#include <algorithm>
#include <numeric>

#include "common/errors.hpp"

namespace paradyse::traces {
namespace {

int64_t padded(int64_t tokens, int64_t quantum) {
  return (tokens + quantum - 1) / quantum * quantum;
}

// First-fit decreasing of one step's sequences into micro-batches of `budget` padded tokens.
std::vector<std::vector<int64_t>> first_fit_decreasing(std::vector<int64_t> sequences, int64_t budget,
                                                       int64_t quantum) {
  std::stable_sort(sequences.begin(), sequences.end(), std::greater<>());
  std::vector<std::vector<int64_t>> bins;
  std::vector<int64_t> used;  // padded tokens per bin
  for (const int64_t tokens : sequences) {
    const int64_t size = padded(tokens, quantum);
    std::size_t bin = 0;
    while (bin < bins.size() && used[bin] + size > budget) ++bin;
    if (bin == bins.size()) {
      bins.emplace_back();
      used.push_back(0);
    }
    bins[bin].push_back(tokens);
    used[bin] += size;
  }
  return bins;
}

}  // namespace

ScheduleBuilder ScheduleBuilder::unpacked(int64_t global_batch) {
  PARADYSE_CHECK(global_batch >= 1, "a global batch of " + std::to_string(global_batch));
  ScheduleBuilder builder;
  builder.global_batch_ = global_batch;
  return builder;
}

ScheduleBuilder ScheduleBuilder::packed(const PackingOptions& options) {
  PARADYSE_CHECK(options.quantum >= 1, "a layout quantum of " + std::to_string(options.quantum));
  if (options.micro_batch_tokens < options.quantum)
    throw InputError("--micro-batch-tokens", 0, "",
                     "expected at least the layout's quantum of " + std::to_string(options.quantum) +
                         " tokens (every document is padded to a multiple of it), got " +
                         std::to_string(options.micro_batch_tokens));
  if (options.global_batch_tokens < 1)
    throw InputError("--global-batch-tokens", 0, "",
                     "expected a positive token budget, got " + std::to_string(options.global_batch_tokens));
  ScheduleBuilder builder;
  builder.packed_ = true;
  builder.packing_ = options;
  return builder;
}

void ScheduleBuilder::close_step() {
  if (step_.empty()) return;
  if (packed_) {
    for (auto& micro_batch : first_fit_decreasing(step_, packing_.micro_batch_tokens, packing_.quantum)) {
      ready_.micro_batches.push_back(std::move(micro_batch));
      ready_.step_of.push_back(steps_);
    }
  } else {
    for (const int64_t tokens : step_) {
      ready_.micro_batches.push_back({tokens});
      ready_.step_of.push_back(steps_);
    }
  }
  ++steps_;
  ++ready_.steps;
  step_.clear();
  step_tokens_ = 0;
}

void ScheduleBuilder::add(int64_t tokens) {
  ++sequences_;
  if (tokens <= 0)
    throw InputError("", 0, "length",
                     "expected documents of at least one token, got " + std::to_string(tokens) +
                         " for sequence " + std::to_string(sequences_));
  if (packed_) {
    if (tokens > packing_.global_batch_tokens)
      throw InputError(
          "--global-batch-tokens", 0, "",
          "a global batch of " + std::to_string(packing_.global_batch_tokens) +
              " tokens is smaller than sequence " + std::to_string(sequences_) + " (" +
              std::to_string(tokens) +
              " tokens): expected a budget of at least the longest sequence, or --max-len to cap it");
    if (step_tokens_ + tokens > packing_.global_batch_tokens) close_step();
    step_.push_back(tokens);
    step_tokens_ += tokens;
    return;
  }
  step_.push_back(tokens);
  if (static_cast<int64_t>(step_.size()) == global_batch_) close_step();
}

void ScheduleBuilder::close() {
  close_step();
}

TrainingSchedule ScheduleBuilder::take() {
  TrainingSchedule taken = std::move(ready_);
  taken.first_micro_batch = micro_batches_;
  micro_batches_ += static_cast<int64_t>(taken.micro_batches.size());
  ready_ = {};
  return taken;
}

namespace {

TrainingSchedule whole(ScheduleBuilder builder, const std::vector<int64_t>& lengths) {
  for (const int64_t tokens : lengths) builder.add(tokens);
  builder.close();
  return builder.take();
}

}  // namespace

TrainingSchedule unpacked_steps(const std::vector<int64_t>& lengths, int64_t global_batch) {
  return whole(ScheduleBuilder::unpacked(global_batch), lengths);
}

TrainingSchedule packed_steps(const std::vector<int64_t>& lengths, const PackingOptions& options) {
  return whole(ScheduleBuilder::packed(options), lengths);
}

}  // namespace paradyse::traces
