// Calibration: measures this machine as the real backend's ranks use it, on the communicator's
// device, and writes what it found as a cluster description ("local-cpu", or "local-cuda" on GPUs) in
// the schema of hw_models/presets/*.json, so that the cost model and the simulator can predict runs
// on it. On a GPU every timing waits for the device, and an op's fixed cost is the kernel's launch
// (events on the device) apart from the host's dispatch (the call's return). Each figure is measured in the
// terms the cost model prices it by (costmodel/op_time.cpp): GEMM and attention FLOP/s as the tracer counts
// FLOPs, copy bandwidth for memory-bound ops, the fixed cost of one op, and all-reduce bus bandwidth by size.
#pragma once

#include <string>
#include <vector>

#include "common/statistics.hpp"
#include "real_backend/calibration_options.hpp"
#include "real_backend/communicator.hpp"
#include "real_backend/torch_backend.hpp"
#include "strategies/model.hpp"

namespace paradyse::real {

// Every rank of the group calls it; all ranks measure at the same time, as they will run, and each
// figure is the slowest rank's (rank_timer.hpp). Rank 0 returns the cluster JSON text (indent 2), the other
// ranks an empty string. Attention is timed at the model's head_dim with model.heads / size() heads (at least
// 1). The figures are of the intra-op thread count the caller set (a training rank's share of the cores).
// A pass takes about a minute on a 2-core machine at the default lengths; throws CommunicationError if the
// group fails.
std::string calibrate_local(Communicator& communicator, const ModelSpec& model,
                            const CalibrationOptions& options);

// A GEMM or attention curve in FLOP/s as fractions of `peak_flops`, as a cluster file takes them: at
// most 1 (attention, computed in float32, can outrun the GEMMs of the timed element type) and at least
// kLowestEfficiency, below which a point was timed while the machine stalled: such a point is raised to
// it and named in `raised` ("GEMM of FLOPs 524288 at 0.015 %").
MeasuredCurve efficiency_of_peak(const MeasuredCurve& flops_per_second, double peak_flops,
                                 const std::string& what, std::vector<std::string>& raised);

// The machine's own speed, as the speed reference's time, from passes whose reference was timed at
// `reference_s[pass]`: the speed it ran at most, the median of the largest set of timings within
// `spread` of one of them (the faster set on a tie). A shared machine's speed has modes (on this
// project's development VM: 0.085 s and 1.8 times that, each for minutes, the copy bandwidth halved
// in the slower), and a model of it describes one; taking the one it ran at most keeps the most
// samples, here and in validate.
double own_speed_s(const std::vector<std::vector<double>>& reference_s, double spread);

// For passes whose speed reference was timed at `reference_s[pass]` (before, between and after their
// groups of figures: n + 1 times for n groups), the passes whose group g was measured at the machine's
// own speed, by group: both references around it within `spread` of own_speed_s.
std::vector<std::vector<int>> passes_at_speed(const std::vector<std::vector<double>>& reference_s,
                                              double spread);

}  // namespace paradyse::real
