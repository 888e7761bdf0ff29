// The ops a program records and the backend calls that record them, each call declared once.
//
// PARADYSE_BACKEND_CALLS is the table: one row per Backend method that records an op, in the order of
// the Kernel enum below. Everything that enumerates calls is generated from it: the enum, the names
// (the keys of a cluster file's measured figures, `gpu.kernels` and
// `host.kernel_dispatch_seconds_by_call`), the OpKind the tracer records for the call, what a measured
// rate of the call is a function of, and whether `calibrate` probes it. Adding a call is one row here
// plus its method in each backend (Backend, the tracer, the real backend) and, when its probe is
// `rate`, a kernel probe (real_backend/kernel_probes.cpp); a test fails where one of them is missing.
//
// A row is X(name, op_kind, size, probe):
//   name     the Backend method.
//   op_kind  the OpKind its op is priced as; std::nullopt where the call decides (a collective's kind).
//   size     what a measured rate of the call is a function of: its FLOPs or the bytes it reads and
//            writes (CallSize).
//   probe    how calibration measures it (CallProbe).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace paradyse {

enum class OpKind : uint8_t {
  gemm,                // dims {m, n, k}
  attention_forward,   // dims {batch·heads, s_q, s_k, head_dim}; flops count computed pairs only
  attention_backward,  // same dims; FlashAttention's recompute counted (2.5× forward)
  scores_gemm,         // unfused attention GEMM, dims {batch·heads, m, n, k}
  memory_bound,        // norms, activations, softmax, merges, copies, optimizer: priced by bytes
  all_gather,
  reduce_scatter,
  all_reduce,
  all_to_all,
  broadcast,
  reduce,
  send_recv,
  wait,       // the compute stream waits for a communication or copy op (its only dependency)
  host_copy,  // activations copied between device and host memory (offload), on the copy stream
};
constexpr std::size_t kOpKindCount = static_cast<std::size_t>(OpKind::host_copy) + 1;
std::string_view to_string(OpKind kind);
constexpr bool is_communication(OpKind kind) {
  return kind >= OpKind::all_gather && kind <= OpKind::send_recv;
}

enum class CallSize : uint8_t { flops, bytes };

enum class CallProbe : uint8_t {
  rate,        // a kernel probe times it at growing sizes; the cluster file keeps the rate curve
  curve,       // priced by the GPU's GEMM or attention curves, which calibration measures on their own
  dispatch,    // its cost is the host's: issuing it and waiting for its one value (read_scalar)
  collective,  // priced by the network's curves, which calibration measures per collective
  host_link,   // priced by the GPU's host link (GpuSpec::host_link_bytes_per_second)
  none,        // a stream wait: no work of its own
};

#define PARADYSE_BACKEND_CALLS(X)                                                      \
  X(zeros, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                     \
  X(cast, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                      \
  X(concat, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                    \
  X(linear, OpKind::gemm, CallSize::flops, CallProbe::curve)                           \
  X(matmul, OpKind::gemm, CallSize::flops, CallProbe::curve)                           \
  X(weight_grad, OpKind::gemm, CallSize::flops, CallProbe::curve)                      \
  X(attention_forward, OpKind::attention_forward, CallSize::flops, CallProbe::curve)   \
  X(attention_backward, OpKind::attention_backward, CallSize::flops, CallProbe::curve) \
  X(merge_attention, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)           \
  X(scores, OpKind::scores_gemm, CallSize::flops, CallProbe::rate)                     \
  X(scores_times, OpKind::scores_gemm, CallSize::flops, CallProbe::rate)               \
  X(scores_transposed_times, OpKind::scores_gemm, CallSize::flops, CallProbe::rate)    \
  X(softmax, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                   \
  X(softmax_backward, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)          \
  X(norm_forward, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)              \
  X(norm_backward, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)             \
  X(gelu, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                      \
  X(gelu_backward, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)             \
  X(swiglu, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                    \
  X(swiglu_backward, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)           \
  X(rotary, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                    \
  X(rotary_backward, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)           \
  X(dropout, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                   \
  X(dropout_backward, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)          \
  X(add, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                       \
  X(add_, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                      \
  X(embedding, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                 \
  X(embedding_backward, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)        \
  X(cross_entropy, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)             \
  X(adam_step, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                 \
  X(sum_of_squares, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)            \
  X(scale_, OpKind::memory_bound, CallSize::bytes, CallProbe::rate)                    \
  X(read_scalar, OpKind::memory_bound, CallSize::bytes, CallProbe::dispatch)           \
  X(communication, std::nullopt, CallSize::bytes, CallProbe::collective)               \
  X(wait, OpKind::wait, CallSize::bytes, CallProbe::none)                              \
  X(offload, OpKind::host_copy, CallSize::bytes, CallProbe::host_link)                 \
  X(reload, OpKind::host_copy, CallSize::bytes, CallProbe::host_link)

// The backend call an op came from: what a machine's per-call figures are keyed by, since one call
// is one kernel on a GPU but several passes on a CPU. `communication` is every collective and
// transfer (OpKind says which), `wait` a stream wait.
enum class Kernel : uint8_t {
#define PARADYSE_CALL_ENUM(name, op_kind, size, probe) name,
  PARADYSE_BACKEND_CALLS(PARADYSE_CALL_ENUM)
#undef PARADYSE_CALL_ENUM
};

struct CallInfo {
  std::string_view name;
  std::optional<OpKind> op_kind;
  CallSize size;
  CallProbe probe;
};

inline constexpr std::array kBackendCalls{
#define PARADYSE_CALL_INFO(name, op_kind, size, probe) CallInfo{#name, op_kind, size, probe},
    PARADYSE_BACKEND_CALLS(PARADYSE_CALL_INFO)
#undef PARADYSE_CALL_INFO
};
constexpr std::size_t kKernelCount = kBackendCalls.size();

constexpr const CallInfo& call_info(Kernel kernel) {
  return kBackendCalls[static_cast<std::size_t>(kernel)];
}
constexpr std::string_view to_string(Kernel kernel) {
  return call_info(kernel).name;
}
constexpr std::optional<Kernel> kernel_named(std::string_view name) {
  for (std::size_t i = 0; i < kKernelCount; ++i)
    if (kBackendCalls[i].name == name) return static_cast<Kernel>(i);
  return std::nullopt;
}
// A compute call: one a cluster file may give figures for (not a collective, a stream wait or a copy
// over the host link).
constexpr bool is_compute_call(Kernel kernel) {
  const CallProbe probe = call_info(kernel).probe;
  return probe != CallProbe::collective && probe != CallProbe::none && probe != CallProbe::host_link;
}

}  // namespace paradyse
