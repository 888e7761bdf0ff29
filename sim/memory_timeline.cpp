#include "sim/memory_timeline.hpp"

#include <algorithm>

namespace paradyse::sim {

MemoryFold fold_memory(const Program& program, int rank, double static_bytes, double fragmentation,
                       double capacity) {
  MemoryFold fold;
  fold.held_bytes.reserve(program.memory.size());
  const auto held = [&](double live) { return static_bytes + live * (1 + fragmentation); };
  double live = 0, peak_live = 0;
  if (static_bytes > capacity)
    fold.oom = OutOfMemory{rank,         Phase::embedding_forward,
                           -1,           "weights, gradients and optimizer states",
                           static_bytes, capacity};
  for (const MemoryEvent& event : program.memory) {
    live += static_cast<double>(event.bytes);
    peak_live = std::max(peak_live, live);
    fold.held_bytes.push_back(held(live));
    if (event.bytes > 0 && !fold.oom && held(live) > capacity) {
      OutOfMemory& oom = fold.oom.emplace();
      oom.rank = rank;
      oom.bytes = held(live);
      oom.capacity = capacity;
      if (event.before_op < program.ops.size()) {
        const Op& op = program.ops[event.before_op];
        oom.phase = op.phase;
        oom.layer = op.layer;
        oom.op = std::string(to_string(op.kind));
        if (!program.label(op).empty()) oom.op += " " + std::string(program.label(op));
      } else {
        oom.phase = Phase::optimizer;
        oom.op = "end of step";
      }
    }
  }
  fold.peak_bytes = held(peak_live);
  return fold;
}

}  // namespace paradyse::sim
