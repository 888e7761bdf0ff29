#include "sim/timeline_json.hpp"

#include <nlohmann/json.hpp>

#include "common/errors.hpp"

namespace paradyse::sim {

namespace {

constexpr double kMicroseconds = 1e6;

using OrderedJson = nlohmann::ordered_json;

void write_event(std::ostream& out, const OrderedJson& event, bool& first) {
  out << (first ? "\n" : ",\n") << event.dump();
  first = false;
}

}  // namespace

void write_timeline(const SimulationResult& result, std::ostream& out) {
  PARADYSE_CHECK(result.timeline.size() == result.programs.size() && !result.programs.empty(),
                 "write_timeline needs a simulation run with record_timeline");
  out << "{\"displayTimeUnit\": \"ms\", \"otherData\": "
      << OrderedJson{{"plan", result.plan}, {"seq", result.tokens}, {"degree", result.degree}}.dump()
      << ", \"traceEvents\": [";
  bool first = true;
  for (std::size_t r = 0; r < result.programs.size(); ++r) {
    const Program& program = result.programs[r];
    const RankTimeline& timeline = result.timeline[r];
    const int pid = static_cast<int>(r);
    write_event(out,
                {{"ph", "M"},
                 {"pid", pid},
                 {"name", "process_name"},
                 {"args", {{"name", "rank " + std::to_string(r)}}}},
                first);
    write_event(
        out,
        {{"ph", "M"}, {"pid", pid}, {"tid", 0}, {"name", "thread_name"}, {"args", {{"name", "compute"}}}},
        first);
    write_event(out,
                {{"ph", "M"},
                 {"pid", pid},
                 {"tid", 1},
                 {"name", "thread_name"},
                 {"args", {{"name", "communication"}}}},
                first);
    for (OpId id = 0; id < program.ops.size(); ++id) {
      const Op& op = program.ops[id];
      const std::string_view label = program.label(op);
      OrderedJson args = {
          {"op", id}, {"kind", to_string(op.kind)}, {"phase", to_string(op.phase)}, {"layer", op.layer}};
      if (is_communication(op.kind))
        args["bytes"] = op.size_bytes;
      else if (op.flops > 0)
        args["flops"] = op.flops;
      write_event(out,
                  {{"name", label.empty() ? to_string(op.kind) : label},
                   {"cat", to_string(op.kind)},
                   {"ph", "X"},
                   {"pid", pid},
                   {"tid", static_cast<int>(op.stream)},
                   {"ts", timeline.op_start_s[id] * kMicroseconds},
                   {"dur", (timeline.op_end_s[id] - timeline.op_start_s[id]) * kMicroseconds},
                   {"args", std::move(args)}},
                  first);
    }
    for (auto [seconds, bytes] : timeline.memory)
      write_event(out,
                  {{"name", "memory"},
                   {"ph", "C"},
                   {"pid", pid},
                   {"ts", seconds * kMicroseconds},
                   {"args", {{"bytes", bytes}}}},
                  first);
  }
  out << "\n]}\n";
}

}  // namespace paradyse::sim
