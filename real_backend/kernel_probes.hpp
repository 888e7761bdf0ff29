// The backend calls `paradyse calibrate` times one by one, each at growing sizes with inputs shaped
// as a training step of the model shapes them on `degree` ranks. A probe is written once against
// the Backend interface, so the same call runs on the real backend (to time it) and on the tracer
// (to read its size exactly as the cost model will count it).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "program/backend.hpp"
#include "program/program.hpp"
#include "strategies/model.hpp"

namespace paradyse::real {

using KernelCall = std::function<void()>;

// A probe is sized as the op table sizes its call (CallSize): by FLOPs or by bytes read and written.
struct KernelProbe {
  Kernel kernel;
  // Its operands were last touched a step ago (the optimizer's weights, moments and gradients), so
  // it is timed with the CPU's caches flushed; the others read what the op before them wrote.
  bool cold = false;
  // Makes the call's inputs on `be` for point `point` (0, 1, ... while it returns a call) and
  // returns the call; an empty call when there is no such point.
  std::function<KernelCall(Backend& be, int point)> prepare;
};

// A probe of every call the op table marks CallProbe::rate: the calls the cost model does not price by
// its own curves (GEMMs and fused attention are), the memory-bound calls and the unfused attention's
// GEMMs, but not read_scalar, whose cost is its dispatch. Sequence lengths double from 64 up to
// `max_tokens`; the optimizer is probed on the shard of every weight of one layer and the vocabulary.
std::vector<KernelProbe> kernel_probes(const ModelSpec& model, int degree, int64_t max_tokens);

// The size of `probe`'s call at `point` as the cost model counts it: the FLOPs or bytes of the ops
// of probe.kernel that the call records on the tracer (rank 0 of `degree`); none past the last point.
std::optional<double> traced_size(const KernelProbe& probe, int point, int degree);

}  // namespace paradyse::real
