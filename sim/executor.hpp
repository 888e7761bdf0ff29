// Runs every rank's program on the platform, op by op: a host, a compute and a communication
// stream per rank, each stream taking its ops in issue order; an op starts when its stream is free,
// its dependencies are done and the host has issued it (the host issues in program order at the
// cluster's dispatch costs, and a synchronous host waits for each compute-stream op to end).
// Kernels last the costmodel's compute time. A collective starts once every rank of the group has
// reached it on its communication stream (NCCL's rings cannot move before), runs as the flows of
// collective_flows.hpp, and ends on every rank when its last flow has arrived and the ring's
// remaining latency-bound steps have passed.
//
// Size dependence: a flow of B bytes in a collective of S bytes carries B / η(S) simulated bytes,
// where η(S) is the fabric's streaming bandwidth at S over its peak (and, for an all-to-all inside a
// node, times the fabric's all-to-all efficiency). Alone on its links a collective thus takes the
// measured NCCL time; sharing links, its flows split them with every other flow.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/platform.hpp"
#include "sim/simulator.hpp"

namespace paradyse::sim {

struct Execution {
  double seconds = 0;
  std::vector<RankResult> per_rank;  // time parts only
  uint64_t kernels = 0;
  uint64_t flows = 0;
  uint64_t analytic_collectives = 0;
  std::vector<RankTimeline> timeline;  // op spans, with options.record_timeline
};

// Must run inside a SimGrid actor of `platform`'s engine.
Execution execute(const Platform& platform, const hw::ClusterSpec& cluster,
                  const std::vector<Program>& programs, const SimulationOptions& options);

}  // namespace paradyse::sim
