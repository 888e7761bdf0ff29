// The analytic price of a traced program: ops list-scheduled on a compute, a communication and a copy
// stream (an op starts when its stream is free, its dependencies are done and the host has issued it,
// so communication and offload copies hide behind compute exactly where the program allows it, and
// short kernels run at the host's pace), and the live-bytes timeline of its allocations. Copies over
// the host link take no share of the compute stream (the GPU's copy engines run them). The host issues in
// program order, each op at OpTimer::dispatch_s; a synchronous host also waits for each compute-stream op.
// While a collective is in flight the compute stream runs at 1 − its OpTimer::compute_contention.
#pragma once

#include <algorithm>
#include <vector>

#include "costmodel/op_time.hpp"

namespace paradyse::costmodel {

struct SegmentCost {
  double seconds = 0;          // from the first op's start to the last op's end
  double compute_s = 0;        // busy time of the compute stream
  double communication_s = 0;  // busy time of the communication stream
  double host_bound_s = 0;     // the compute stream idle, waiting for the host to issue its next op
  double flops = 0;
  double bus_bytes = 0;
  double memory_delta_bytes = 0;  // live bytes at the end minus at the start
  double memory_peak_bytes = 0;   // highest live bytes above the start

  // The rest of the time the compute stream is not busy: waiting for communication, or for the
  // communication stream to finish after it.
  double exposed_communication_s() const { return std::max(0.0, seconds - compute_s - host_bound_s); }
  // This segment after `earlier`, with no overlap across the boundary.
  SegmentCost& then(const SegmentCost& later);
};

// One phase of a program (PhaseMark to the next mark), priced as if it started on idle streams; past
// the first, as one of a stack of like phases behind an asynchronous host (program_cost.cpp).
struct PhaseCost {
  Phase phase;
  int layer;
  SegmentCost cost;
};
std::vector<PhaseCost> cost_phases(const Program& program, const OpTimer& timer);

// A whole program priced by its phases one after another: its seconds, those of its optimizer
// phases, and the peak a rank holds: `static_bytes` plus its live bytes at their peak with the
// allocator's `fragmentation` on top (as the simulator's memory fold counts them).
struct ProgramPrice {
  double seconds = 0;
  double host_bound_s = 0;  // of seconds, the compute stream waiting for the host (SegmentCost)
  double optimizer_s = 0;
  double peak_bytes = 0;
  double host_peak_bytes = 0;  // host memory the rank's offloaded activations take at their peak
};
ProgramPrice price_program(const Program& program, const OpTimer& timer, double static_bytes,
                           double fragmentation);

}  // namespace paradyse::costmodel
