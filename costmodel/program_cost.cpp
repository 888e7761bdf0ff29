#include "costmodel/program_cost.hpp"

#include <algorithm>

namespace paradyse::costmodel {

SegmentCost& SegmentCost::then(const SegmentCost& later) {
  memory_peak_bytes = std::max(memory_peak_bytes, memory_delta_bytes + later.memory_peak_bytes);
  memory_delta_bytes += later.memory_delta_bytes;
  seconds += later.seconds;
  compute_s += later.compute_s;
  communication_s += later.communication_s;
  host_bound_s += later.host_bound_s;
  flops += later.flops;
  bus_bytes += later.bus_bytes;
  return *this;
}

namespace {

constexpr double kFarAhead_s = 1e9;  // a host lead no phase's time comes near

// A collective in flight on the communication stream, taking `share` of the compute stream's rate.
struct ContendedSpan {
  double start, end, share;
};

// When compute of `work_s` seconds at the full rate, started at `start`, ends on a stream that runs
// at 1 − share while one of `spans` (in order, disjoint) is in flight.
double contended_end(double start, double work_s, const std::vector<ContendedSpan>& spans) {
  auto span = std::partition_point(spans.begin(), spans.end(),
                                   [&](const ContendedSpan& s) { return s.end <= start; });
  double time = start, left_s = work_s;
  for (; span != spans.end() && span->start < time + left_s; ++span) {
    if (span->start > time) {
      left_s -= span->start - time;
      time = span->start;
    }
    const double rate = 1 - span->share;
    const double capacity_s = (span->end - time) * rate;
    if (capacity_s >= left_s) return time + left_s / rate;
    left_s -= capacity_s;
    time = span->end;
  }
  return time + left_s;
}

// A compute-stream op as scheduled: when it could start but for its stream, its work at the full
// rate, and its start.
struct ComputeSlot {
  OpId id;
  double ready, work_s, start;
};

// `host_lead_s`: how far ahead of the streams the host starts (it has issued nothing yet).
SegmentCost cost_segment(const Program& program, OpId first_op, OpId end_op, uint32_t first_event,
                         uint32_t end_event, const OpTimer& timer, const std::vector<double>& issue_s,
                         std::vector<double>& finish, double host_lead_s) {
  SegmentCost cost;
  finish.assign(end_op - first_op, 0.0);
  double stream_free[kStreamCount] = {0, 0, 0};
  double host = -host_lead_s;  // when the host has issued the ops so far
  std::vector<ComputeSlot> compute;
  std::vector<ContendedSpan> spans;
  for (OpId id = first_op; id < end_op; ++id) {
    const Op& op = program.ops[id];
    const auto stream = static_cast<std::size_t>(op.stream);
    host += issue_s[id];
    double deps_done = 0;
    for (OpId dep : op.deps)
      if (dep >= first_op) deps_done = std::max(deps_done, finish[dep - first_op]);
    const double ready = std::max(host, deps_done);
    const double start = std::max(stream_free[stream], ready);
    // The compute stream could have started but for the host's issue.
    if (op.stream == Stream::compute)
      cost.host_bound_s += std::max(0.0, host - std::max(stream_free[0], deps_done));
    const double duration = timer.seconds(op);
    double end = start + duration;
    if (op.stream == Stream::compute) {
      if (!spans.empty()) end = contended_end(start, duration, spans);
      compute.push_back({id, ready, duration, start});
    } else if (const double share = timer.compute_contention(op); share > 0 && duration > 0) {
      spans.push_back({start, end, share});
      // The collective starts under compute issued before it (a host running ahead): those ops end
      // later. No op scheduled since depends on them (it would have started after them), so they are
      // placed again from the first that it overlaps.
      std::size_t first = compute.size();
      while (first > 0 && finish[compute[first - 1].id - first_op] > start) --first;
      for (std::size_t k = first; k < compute.size(); ++k) {
        ComputeSlot& slot = compute[k];
        if (k > first) slot.start = std::max(slot.ready, finish[compute[k - 1].id - first_op]);
        finish[slot.id - first_op] = contended_end(slot.start, slot.work_s, spans);
      }
      if (first < compute.size()) stream_free[0] = finish[compute.back().id - first_op];
    }
    finish[id - first_op] = end;
    stream_free[stream] = end;
    if (op.host_waits || (timer.synchronous_host() && op.stream == Stream::compute)) host = end;
    if (op.stream == Stream::communication) cost.communication_s += duration;
    cost.flops += op.flops;
    cost.bus_bytes += op.bus_bytes;
  }
  for (const ComputeSlot& slot : compute) cost.compute_s += finish[slot.id - first_op] - slot.start;
  cost.seconds = std::max({stream_free[0], stream_free[1], stream_free[2], host});
  double live = 0;
  for (uint32_t e = first_event; e < end_event; ++e) {
    live += static_cast<double>(program.memory[e].bytes);
    cost.memory_peak_bytes = std::max(cost.memory_peak_bytes, live);
  }
  cost.memory_delta_bytes = live;
  return cost;
}

}  // namespace

std::vector<PhaseCost> cost_phases(const Program& program, const OpTimer& timer) {
  std::vector<PhaseCost> phases;
  std::vector<double> finish;
  const std::vector<double> issue_s = timer.issue_s(program);
  for (std::size_t i = 0; i < program.phases.size(); ++i) {
    const PhaseMark& mark = program.phases[i];
    const bool last = i + 1 == program.phases.size();
    const OpId end_op = last ? static_cast<OpId>(program.ops.size()) : program.phases[i + 1].first_op;
    const auto end_event =
        last ? static_cast<uint32_t>(program.memory.size()) : program.phases[i + 1].first_memory_event;
    // An asynchronous host runs on into the next phase while the device finishes one, so in a stack of
    // like phases each takes, in the steady state, the longer of its device time (the host far enough
    // ahead never to be waited for) and its host's issue time. The first phase starts with the host
    // level with the device (the step before ended with a read), as does every phase on a synchronous
    // host (it never runs ahead).
    const bool ahead = i > 0 && !timer.synchronous_host();
    SegmentCost cost = cost_segment(program, mark.first_op, end_op, mark.first_memory_event, end_event, timer,
                                    issue_s, finish, ahead ? kFarAhead_s : 0);
    if (ahead) {
      double phase_issue_s = 0;
      for (OpId id = mark.first_op; id < end_op; ++id) phase_issue_s += issue_s[id];
      cost.host_bound_s = std::max(0.0, phase_issue_s - cost.seconds);
      cost.seconds = std::max(cost.seconds, phase_issue_s);
    }
    phases.push_back({mark.phase, mark.layer, cost});
  }
  return phases;
}

ProgramPrice price_program(const Program& program, const OpTimer& timer, double static_bytes,
                           double fragmentation) {
  SegmentCost total;
  ProgramPrice price;
  for (const PhaseCost& phase : cost_phases(program, timer)) {
    if (phase.phase == Phase::optimizer) price.optimizer_s += phase.cost.seconds;
    total.then(phase.cost);
  }
  price.seconds = total.seconds;
  price.host_bound_s = total.host_bound_s;
  price.peak_bytes = static_bytes + total.memory_peak_bytes * (1 + fragmentation);
  price.host_peak_bytes = static_cast<double>(host_memory_peak(program).bytes);
  return price;
}

}  // namespace paradyse::costmodel
