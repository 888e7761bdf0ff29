// How a training framework issues a step's calls from the host: what each call costs the host thread
// that issues it, and whether that thread waits for the device. It is a property of the framework (eager
// PyTorch driven from Python, as Megatron-LM, Megatron-DeepSpeed and TorchTitan issue a step; a C++
// backend; CUDA graphs, which issue a whole step at once) and of the host CPU, not of the GPU, so it is
// an input of its own: framework presets are JSON files under hw_models/frameworks/ (units in the keys,
// SI values, a `source` for every figure), a cluster preset names the one its validation was measured
// with, and --framework replaces it.
//
// {"name", "description", "host_machine", "host": {"kernel_dispatch_seconds", "communication_dispatch_
//  seconds", "synchronous", "kernel_dispatch_seconds_by_call" (optional), "communication_dispatch_
//  seconds_by_kind" (optional), "layer_calls" (optional, LayerCalls), "source": {...}},
//  "eager_calls" (optional, EagerCall by call name)}
// A framework whose host is another preset's names it with "host_from": NAME in place of "host" and
// "host_machine".
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_input.hpp"

namespace paradyse::hw {

// The calls a framework's code issues for one transformer layer, counted from that code, and what each
// kind of call costs the host. Kinds are the file's own ("kernel": an op that launches a kernel,
// "host_op": a metadata-only op such as a view, "compiled_region": a call into a compiled graph, ...).
// A layer's forward and backward issue their counts; a backward that runs the attention core again
// (selective recomputation) or the whole layer (full) adds its rerun's counts, on each direction (a
// checkpointed forward saves RNG states too).
//
// "layer_calls": {"call_seconds": {KIND: s, ..., "source": {KIND: "...", ...}},
//                 "forward": {KIND: n, ...}, "backward": {...},
//                 "attention_rerun": {"forward": {...}, "backward": {...}}, "layer_rerun": {...},
//                 "source": {"forward": "...", "backward": "...", "attention_rerun": "...",
//                            "layer_rerun": "..."}}
struct LayerCalls {
  enum Direction { forward, backward };
  enum Rerun { none, attention, layer };  // what the backward runs again of the forward
  using Counts = std::map<std::string, int>;

  std::map<std::string, double> call_s;         // by kind
  std::array<std::array<Counts, 3>, 2> counts;  // [Direction][Rerun]: the rerun's calls included

  // The host's time to issue a layer's calls in one direction.
  double host_s(Direction direction, Rerun rerun) const {
    double seconds = 0;
    for (const auto& [kind, n] : counts[direction][rerun]) seconds += n * call_s.at(kind);
    return seconds;
  }
};

// The host thread of each rank, which issues its kernels and collectives in program order: a device
// op starts no earlier than its issue, so a chain of short kernels runs at the host's pace (eager
// PyTorch). `synchronous`: the host waits for each kernel to end before it issues the next, and
// for a communication when the program waits for it (a CPU, where host and device are one thread).
struct HostSpec {
  double kernel_dispatch_s = 0;         // per compute op: framework dispatch and kernel launch
  double communication_dispatch_s = 0;  // per collective or transfer call
  bool synchronous = false;
  // Optional ("kernel_dispatch_seconds_by_call"): a backend call's own cost by its name (Backend's
  // method), measured as the framework issues it; the other calls take kernel_dispatch_s.
  std::map<std::string, double> kernel_dispatch_s_by_call;
  // Optional ("communication_dispatch_seconds_by_kind"): what issuing a collective or transfer of a
  // kind (all_gather, send_recv, ...) costs the host, measured as the backend's call takes to return;
  // the other kinds take communication_dispatch_s. (Gloo's send writes its bytes on the calling
  // thread: on a CPU, a send_recv of 256 KiB returned after 118 µs, an all-to-all after 12 µs.)
  std::map<std::string, double> communication_dispatch_s_by_kind;
  // Optional: a layer's calls as the framework issues them. Its layer phases then cost the host these
  // calls, spread over the phase's compute ops, in place of those ops' kernel_dispatch_s.
  std::optional<LayerCalls> layer_calls;

  // Whether issuing ops costs the host anything (else only a synchronous host or a read waits).
  bool dispatches_at_a_cost() const {
    const auto positive = [](const auto& entry) { return entry.second > 0; };
    return kernel_dispatch_s > 0 || communication_dispatch_s > 0 || layer_calls.has_value() ||
           std::any_of(kernel_dispatch_s_by_call.begin(), kernel_dispatch_s_by_call.end(), positive) ||
           std::any_of(communication_dispatch_s_by_kind.begin(), communication_dispatch_s_by_kind.end(),
                       positive);
  }
};

// How a framework's model code runs one of paradyse's fused calls on the device: as `kernels` eager
// PyTorch kernels that together read and write `bytes_per_element` bytes per element of the call
// (counted from that code: tools/measure/eager_kernels.py). An element is one of the call's input x
// for norm_forward, norm_backward, gelu, gelu_backward, rotary and rotary_backward, one of its output
// for swiglu and swiglu_backward (tokens × ffn_hidden): the calls an "eager_calls" block may name.
//
// "eager_calls": {CALL: {"kernels": n, "bytes_per_element": B, "source": "..."}, ...}
struct EagerCall {
  int kernels = 1;
  double bytes_per_element = 0;
};
inline constexpr std::array<std::string_view, 8> kEagerCallNames{
    "norm_forward", "norm_backward",   "gelu",   "gelu_backward",
    "swiglu",       "swiglu_backward", "rotary", "rotary_backward"};

struct FrameworkSpec {
  std::string name;
  std::string description;   // one line: the framework and how it issues calls
  std::string host_machine;  // the CPU and software the host figures were measured on, or why none
  std::string source;        // "preset NAME" or the file's path
  std::string host_from;     // the preset whose host this one takes ("host_from"), or ""
  HostSpec host;
  std::map<std::string, EagerCall> eager_calls;  // by call name; the others run as paradyse prices them
};

// A "host" block of a framework or cluster file; InputError naming the file and field otherwise.
HostSpec read_host(const json_input::Object& host);
// `name_or_path`: a preset (framework_preset_names) or the path of a JSON file of the same schema;
// InputError naming the file and field, or listing the presets, otherwise.
FrameworkSpec load_framework(const std::string& name_or_path);
std::vector<std::string> framework_preset_names();  // sorted

}  // namespace paradyse::hw
