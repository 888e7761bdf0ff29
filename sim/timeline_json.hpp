// The Chrome / Perfetto trace-event JSON of a simulation run with record_timeline (loads in
// ui.perfetto.dev and chrome://tracing): one process per rank, one thread per stream, one complete
// event ("ph": "X") per op with its kind, phase, layer and bytes, and the rank's memory as a
// counter. Times are microseconds from the iteration's start.
#pragma once

#include <ostream>

#include "sim/simulator.hpp"

namespace paradyse::sim {

// Throws InternalError when `result` was simulated without record_timeline.
void write_timeline(const SimulationResult& result, std::ostream& out);

}  // namespace paradyse::sim
