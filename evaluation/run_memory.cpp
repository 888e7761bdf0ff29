#include "evaluation/run_memory.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "common/errors.hpp"
#include "common/units.hpp"
#include "steps/estimate.hpp"
#include "strategies/sequence_layout.hpp"
#include "strategies/training_step.hpp"

namespace paradyse::evaluation {

double predicted_rank_bytes(const ModelSpec& model, const Plan& plan, int ranks,
                            const std::vector<int64_t>& lengths, int64_t batch, bool mixed_precision) {
  StepSpec spec;
  spec.model = &model;
  spec.tokens =
      SequenceLayout::padded_length(*std::max_element(lengths.begin(), lengths.end()), ranks, model.causal);
  spec.batch = batch;
  spec.plan = plan;
  const Program program = trace_training_step(spec, 0, ranks);
  double live = 0, peak = 0;
  for (const MemoryEvent& event : program.memory) {
    live += static_cast<double>(event.bytes);
    peak = std::max(peak, live);
  }
  steps::MemoryBreakdown fixed;
  steps::static_memory(model, ranks, fixed);
  return fixed.weights_bytes + fixed.gradients_bytes + fixed.optimizer_states_bytes +
         (mixed_precision ? 1 : 2) * peak;
}

double available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * kKiB;
  return 0;
}

void check_run_fits(double rank_bytes, int ranks, double available_bytes) {
  if (available_bytes <= 0 || rank_bytes * ranks <= available_bytes) return;
  throw InputError(
      "--seq", 0, "",
      fmt::format("expected a run that fits in this machine's {:.1f} GiB of available memory, got "
                  "one of {} ranks of {:.1f} GiB each by the cost model: lower --seq, --batch or "
                  "--layers, or take a smaller --model",
                  available_bytes / kGiB, ranks, rank_bytes / kGiB));
}

}  // namespace paradyse::evaluation
