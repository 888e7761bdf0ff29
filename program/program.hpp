// What the tracing backend records for one rank: the ops a strategy issued, in issue order, with
// their streams, dependencies, work and bytes, and the memory events of the tensors they made.
// costmodel/ prices programs analytically; sim/ executes them. Both see nothing else of a strategy.
#pragma once

#include <boost/container/small_vector.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "program/backend.hpp"
#include "program/op_table.hpp"

namespace paradyse {

// What a collective of `input_bytes` per rank over `degree` ranks counts, as Op documents below: the
// one place both the tracer and the real backend take these numbers from.
struct CommunicationBytes {
  double size_bytes = 0;
  double bus_bytes = 0;
};
CommunicationBytes communication_bytes(OpKind kind, double input_bytes, int degree);

// The compute stream, the communication stream (collectives and transfers) and the copy stream (copies
// between device and host memory: activation offload), as a GPU runs them at once.
enum class Stream : uint8_t { compute, communication, copy };
constexpr std::size_t kStreamCount = 3;

using OpId = uint32_t;
// Most ops wait on one to three others: held in the op, not in an allocation of their own (a traced
// step has hundreds of thousands of ops, and the simulator reads every op's list as it starts it).
using OpDeps = boost::container::small_vector<OpId, 3>;

struct Op {
  OpKind kind = OpKind::memory_bound;
  Kernel kernel = Kernel::zeros;
  Stream stream = Stream::compute;
  Phase phase = Phase::layer_forward;
  int16_t layer = -1;
  uint16_t label = 0;             // index into Program::labels
  bool partially_masked = false;  // attention: the causal mask or document boundaries cut this block
  bool drops_out = false;         // attention: the kernel drops probabilities (dropout inside)
  bool host_waits = false;        // the host issues nothing more until this op ends (read_scalar)
  OpDeps deps;                    // ops that must finish before this one starts
  double flops = 0;
  double memory_bytes = 0;  // HBM bytes read and written
  // Communication, counted as nccl-tests does (its doc/PERFORMANCE.md): `size_bytes` is the collective's
  // size (the full buffer; per-rank buffer for all_to_all and send_recv), `bus_bytes` what each rank
  // moves: (p−1)/p·size for all_gather and reduce_scatter, 2(p−1)/p·size for all_reduce, (p−1)/p·size
  // for all_to_all, size for broadcast, reduce and send_recv.
  double size_bytes = 0;
  double bus_bytes = 0;
  CommGroup group = CommGroup::parallel;
  // The group's ranks in the job: group_first, group_first + group_stride, … (RankSet); root and peers
  // are ranks within the group.
  int16_t group_first = 0;
  int16_t group_size = 1;
  int16_t group_stride = 1;
  int16_t root = -1;     // broadcast, reduce
  int16_t send_to = -1;  // send_recv
  int16_t recv_from = -1;
  // GEMMs {m, n, k}; attention and score GEMMs as OpKind says; the elementwise calls a framework may
  // run as eager kernels (hw::EagerCall) {elements}: of x for norms, GELU and rotary embeddings, of the
  // output for SwiGLU.
  std::array<int64_t, 4> dims{};
  // A compute time recorded elsewhere (an op read from a Chakra trace, chakra/import.hpp): when ≥ 0,
  // the op takes this long on any cluster instead of its price (costmodel::OpTimer::compute_s).
  double duration_s = -1;

  RankSet ranks() const { return {group_first, group_size, group_stride}; }
};

// A buffer allocated (bytes > 0) or freed (bytes < 0) when `before_op` ops had been issued.
struct MemoryEvent {
  OpId before_op = 0;
  int64_t bytes = 0;
};

struct PhaseMark {
  Phase phase;
  int layer;
  OpId first_op;
  uint32_t first_memory_event;
  Rerun rerun = Rerun::nothing;  // of a layer's phases
};

struct Program {
  int rank = 0;  // in the parallel group the program started with
  int degree = 1;
  int job_rank = 0;  // in the job (Groups::job_rank)
  int job_degree = 1;
  std::vector<Op> ops;
  std::vector<MemoryEvent> memory;
  // Host memory the rank's offloaded activations take (pinned), allocated and freed as `memory` is.
  std::vector<MemoryEvent> host_memory;
  std::vector<PhaseMark> phases;
  std::vector<std::string> labels{""};

  std::string_view label(const Op& op) const { return labels[op.label]; }
};

// The most host memory the program's offloaded activations hold at once, and when (before_op): the
// fold of host_memory in issue order.
MemoryEvent host_memory_peak(const Program& program);

}  // namespace paradyse
