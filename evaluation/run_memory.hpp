// Whether a real run fits in this machine's memory, asked before any rank starts: a plan that does
// not fit grows until the kernel kills it, minutes later, instead of failing at once.
#pragma once

#include <cstdint>
#include <vector>

#include "strategies/model.hpp"
#include "strategies/strategy.hpp"

namespace paradyse::evaluation {

// Bytes one rank holds at its peak, from the traced step of the longest length: weights, gradients
// and optimizer states (steps::static_memory) plus the highest live activation bytes. The tracer
// counts bf16 activations; a float32 run (`mixed_precision` false) holds twice that. No allocator
// slack: that is a GPU caching allocator's figure.
double predicted_rank_bytes(const ModelSpec& model, const Plan& plan, int ranks,
                            const std::vector<int64_t>& lengths, int64_t batch, bool mixed_precision);

// What this machine can still give: MemAvailable of /proc/meminfo, in bytes; 0 when unknown.
double available_memory_bytes();

// InputError naming the run's flags when `ranks` ranks of `predicted_rank_bytes` need more than
// `available_bytes` (no check when that is 0).
void check_run_fits(double rank_bytes, int ranks, double available_bytes);

}  // namespace paradyse::evaluation
