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

TrainingSchedule unpacked_steps(const std::vector<int64_t>& lengths, int64_t global_batch) {
  PARADYSE_CHECK(global_batch >= 1, "a global batch of " + std::to_string(global_batch));
  TrainingSchedule schedule;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    schedule.micro_batches.push_back({lengths[i]});
    schedule.step_of.push_back(static_cast<int64_t>(i) / global_batch);
  }
  schedule.steps = schedule.step_of.empty() ? 0 : schedule.step_of.back() + 1;
  return schedule;
}

TrainingSchedule packed_steps(const std::vector<int64_t>& lengths, const PackingOptions& options) {
  PARADYSE_CHECK(options.quantum >= 1, "a layout quantum of " + std::to_string(options.quantum));
  if (options.micro_batch_tokens < options.quantum)
    throw InputError("--micro-batch-tokens", 0, "",
                     "expected at least the layout's quantum of " + std::to_string(options.quantum) +
                         " tokens (every document is padded to a multiple of it), got " +
                         std::to_string(options.micro_batch_tokens));
  if (options.global_batch_tokens < 1)
    throw InputError("--global-batch-tokens", 0, "",
                     "expected a positive token budget, got " + std::to_string(options.global_batch_tokens));
  TrainingSchedule schedule;
  std::vector<int64_t> step;
  int64_t step_tokens = 0;
  auto close_step = [&] {
    if (step.empty()) return;
    for (auto& micro_batch : first_fit_decreasing(step, options.micro_batch_tokens, options.quantum)) {
      schedule.micro_batches.push_back(std::move(micro_batch));
      schedule.step_of.push_back(schedule.steps);
    }
    ++schedule.steps;
    step.clear();
    step_tokens = 0;
  };
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    const int64_t tokens = lengths[i];
    if (tokens <= 0)
      throw InputError("", 0, "length",
                       "expected documents of at least one token, got " + std::to_string(tokens) +
                           " for sequence " + std::to_string(i + 1));
    if (tokens > options.global_batch_tokens)
      throw InputError(
          "--global-batch-tokens", 0, "",
          "a global batch of " + std::to_string(options.global_batch_tokens) +
              " tokens is smaller than sequence " + std::to_string(i + 1) + " (" + std::to_string(tokens) +
              " tokens): expected a budget of at least the longest sequence, or --max-len to cap it");
    if (step_tokens + tokens > options.global_batch_tokens) close_step();
    step.push_back(tokens);
    step_tokens += tokens;
  }
  close_step();
  return schedule;
}

}  // namespace paradyse::traces
