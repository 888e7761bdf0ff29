// A rank's memory over one iteration: the static terms (weights, gradients, optimizer states) plus
// the tensors its program holds, plus the caching allocator's fragmentation on top of live tensors.
// Allocations and frees are taken in issue order, as the host-side caching allocator sees them (it
// hands out and takes back blocks when ops are issued, ahead of the GPU streams); this is the same
// fold as the analytic model's, so both report the same peak.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "sim/simulator.hpp"

namespace paradyse::sim {

struct MemoryFold {
  double peak_bytes = 0;           // static + live at its peak · (1 + fragmentation)
  std::optional<OutOfMemory> oom;  // the first allocation that went over capacity
  std::vector<double> held_bytes;  // after each of program.memory's events
};

MemoryFold fold_memory(const Program& program, int rank, double static_bytes, double fragmentation,
                       double capacity);

}  // namespace paradyse::sim
