#include "costmodel/op_time.hpp"

#include <algorithm>
#include <cmath>

#include "common/errors.hpp"

namespace paradyse::costmodel {

int latency_hops(OpKind kind, int p) {
  switch (kind) {
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::broadcast:
    case OpKind::reduce:
      return p - 1;
    case OpKind::all_reduce:
      return 2 * (p - 1);
    case OpKind::all_to_all:
    case OpKind::send_recv:
      return 1;
    default:
      return 0;
  }
}

hw::FabricSpec::Collective measured_as(OpKind kind) {
  if (kind == OpKind::all_gather) return hw::FabricSpec::Collective::all_gather;
  if (kind == OpKind::reduce_scatter) return hw::FabricSpec::Collective::reduce_scatter;
  if (kind == OpKind::send_recv) return hw::FabricSpec::Collective::send_recv;
  return hw::FabricSpec::Collective::all_reduce;
}

double gemm_arithmetic_s(const hw::GpuSpec& gpu, int64_t batch, int64_t m, int64_t n, int64_t k) {
  if (!gpu.gemm_tiles) {
    const double flops = 2.0 * static_cast<double>(batch * m) * static_cast<double>(n * k);
    return flops / (gpu.bf16_flops_per_second * gpu.gemm_efficiency_by_flops.at(flops));
  }
  const hw::GemmTiles& tiles = *gpu.gemm_tiles;
  const double sm_flops_per_second =
      gpu.bf16_flops_per_second / tiles.streaming_multiprocessors * tiles.peak_efficiency;
  constexpr std::array<std::pair<int64_t, int64_t>, 5> kTileShapes{
      {{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}}};
  double best_s = 0;
  for (const auto& [tile_m, tile_n] : kTileShapes) {
    const int64_t count = batch * ((m + tile_m - 1) / tile_m) * ((n + tile_n - 1) / tile_n);
    const int64_t waves = (count + tiles.streaming_multiprocessors - 1) / tiles.streaming_multiprocessors;
    const double wave_s = 2.0 * static_cast<double>(tile_m * tile_n) *
                          (static_cast<double>(k) + tiles.setup_k) / sm_flops_per_second;
    const double seconds = static_cast<double>(waves) * wave_s;
    if (best_s == 0 || seconds < best_s) best_s = seconds;
  }
  return best_s;
}

namespace {
// The Kernel a cluster file's figure names under `field`: a compute call of the backend.
std::size_t compute_call(const hw::ClusterSpec& cluster, const std::string& field, const std::string& name) {
  const std::optional<Kernel> kernel = kernel_named(name);
  if (!kernel || !is_compute_call(*kernel))
    throw InputError(
        cluster.source, 0, field + "." + name,
        "expected the name of a compute call of the backend (linear, softmax, norm_forward, ...)");
  return static_cast<std::size_t>(*kernel);
}

// The OpKind a cluster file's figure names under `field`: a collective or transfer.
std::size_t communication_kind(const hw::ClusterSpec& cluster, const std::string& field,
                               const std::string& name) {
  for (std::size_t k = 0; k < kOpKindCount; ++k)
    if (const auto kind = static_cast<OpKind>(k); is_communication(kind) && to_string(kind) == name) return k;
  throw InputError(cluster.source, 0, field + "." + name,
                   "expected the name of a collective or transfer (all_gather, reduce_scatter, all_reduce, "
                   "all_to_all, broadcast, reduce, send_recv)");
}
}  // namespace

OpTimer::OpTimer(const hw::ClusterSpec& cluster, int degree,
                 std::shared_ptr<const RoutedCollectiveTimer> routed)
    : cluster_(cluster), degree_(degree), routed_(std::move(routed)) {
  PARADYSE_CHECK(
      degree >= 1 && degree <= cluster.num_gpus(),
      "a group of " + std::to_string(degree) + " ranks on " + std::to_string(cluster.num_gpus()) + " GPUs");
  if (!routed_) routed_ = std::make_shared<const RoutedCollectiveTimer>(cluster);
  for (const auto& [name, rate] : cluster.gpu.kernel_rates)
    measured_[compute_call(cluster, "gpu.kernels", name)] = &rate;
  dispatch_s_.fill(cluster.host.kernel_dispatch_s);
  for (const auto& [name, seconds] : cluster.host.kernel_dispatch_s_by_call)
    dispatch_s_[compute_call(cluster, "host.kernel_dispatch_seconds_by_call", name)] = seconds;
  // A call the framework runs as eager kernels costs the host each kernel's issue.
  for (const auto& [name, eager] : cluster.eager_calls) {
    const std::size_t call = compute_call(cluster, "eager_calls", name);
    eager_[call] = &eager;
    dispatch_s_[call] = eager.kernels * cluster.host.kernel_dispatch_s;
  }
  communication_dispatch_s_.fill(cluster.host.communication_dispatch_s);
  for (const auto& [name, seconds] : cluster.host.communication_dispatch_s_by_kind)
    communication_dispatch_s_[communication_kind(cluster, "host.communication_dispatch_seconds_by_kind",
                                                 name)] = seconds;
}

double OpTimer::seconds(const Op& op) const {
  if (op.kind == OpKind::wait) return 0;
  if (op.kind == OpKind::host_copy) return host_copy_s(op);
  return is_communication(op.kind) ? communication_s(op) : compute_s(op);
}

double OpTimer::host_copy_s(const Op& op) const {
  if (op.duration_s >= 0) return op.duration_s;  // recorded, not priced (Op::duration_s)
  if (cluster_.gpu.host_link_bytes_per_second <= 0)
    throw InputError(cluster_.source, 0, "gpu.host_link_bytes_per_second",
                     "expected the GPU's host link bandwidth and host memory to price activation offload, "
                     "which this cluster does not give");
  return op.size_bytes / cluster_.gpu.host_link_bytes_per_second;
}

double OpTimer::dispatch_s(const Op& op) const {
  if (op.kind == OpKind::wait) return 0;
  return is_communication(op.kind) ? communication_dispatch_s_[static_cast<std::size_t>(op.kind)]
                                   : dispatch_s_[static_cast<std::size_t>(op.kernel)];
}

std::vector<double> OpTimer::issue_s(const Program& program) const {
  std::vector<double> seconds(program.ops.size());
  for (std::size_t id = 0; id < program.ops.size(); ++id) seconds[id] = dispatch_s(program.ops[id]);
  const std::optional<hw::LayerCalls>& calls = cluster_.host.layer_calls;
  if (!calls) return seconds;
  for (std::size_t i = 0; i < program.phases.size(); ++i) {
    const PhaseMark& mark = program.phases[i];
    if (mark.layer < 0 || (mark.phase != Phase::layer_forward && mark.phase != Phase::layer_backward))
      continue;
    const OpId end = i + 1 < program.phases.size() ? program.phases[i + 1].first_op
                                                   : static_cast<OpId>(program.ops.size());
    const auto compute = [&](OpId id) {
      return program.ops[id].stream == Stream::compute && program.ops[id].kind != OpKind::wait;
    };
    int count = 0;
    for (OpId id = mark.first_op; id < end; ++id) count += compute(id) ? 1 : 0;
    if (count == 0) continue;
    const auto direction =
        mark.phase == Phase::layer_forward ? hw::LayerCalls::forward : hw::LayerCalls::backward;
    const auto rerun = mark.rerun == Rerun::layer       ? hw::LayerCalls::layer
                       : mark.rerun == Rerun::attention ? hw::LayerCalls::attention
                                                        : hw::LayerCalls::none;
    const double each_s = calls->host_s(direction, rerun) / static_cast<double>(count);
    for (OpId id = mark.first_op; id < end; ++id)
      if (compute(id)) seconds[id] = each_s;
  }
  return seconds;
}

double OpTimer::compute_s(const Op& op) const {
  if (op.duration_s >= 0) return op.duration_s;  // recorded, not priced (Op::duration_s)
  // An op read from a trace that does not count its elements is priced as the fused call.
  if (const hw::EagerCall* eager = eager_[static_cast<std::size_t>(op.kernel)]; eager && op.dims[0] > 0)
    return eager_s(*eager, op);
  // A measured call's time includes its launch and every pass it makes.
  if (const hw::KernelRate* rate = measured_[static_cast<std::size_t>(op.kernel)])
    return rate->seconds(rate->by_flops ? op.flops : op.memory_bytes);
  const hw::GpuSpec& gpu = cluster_.gpu;
  const double memory = op.memory_bytes / gpu.hbm_bytes_per_second;
  double arithmetic = 0;
  switch (op.kind) {
    case OpKind::gemm:
      arithmetic = gemm_arithmetic_s(gpu, 1, op.dims[0], op.dims[1], op.dims[2]);
      break;
    case OpKind::scores_gemm:
      arithmetic = gemm_arithmetic_s(gpu, op.dims[0], op.dims[1], op.dims[2], op.dims[3]);
      break;
    case OpKind::attention_forward:
    case OpKind::attention_backward: {
      // FlashAttention's throughput depends on the key length of the block and on whether a causal
      // mask cuts it (the FlashAttention-2 benchmark charts of Dao-AILab/flash-attention: on A100, head
      // dim 128, forward+backward, 151 TFLOP/s at 512 tokens and 203 at 16K, causal 99 and 189), on
      // which implementation of it the framework runs (its Triton one: 78 and 95, causal 50 and 80),
      // and, where the forward is measured apart, on the direction (an H100's forward of 512 tokens
      // runs 1.5x its forward+backward's rate).
      const bool forward = op.kind == OpKind::attention_forward;
      const double efficiency = cluster_.attention_curves().efficiency(op.partially_masked, forward,
                                                                       static_cast<double>(op.dims[2]));
      arithmetic = op.flops / (gpu.bf16_flops_per_second * efficiency);
      // Dropout inside the kernel draws a random number per computed score (measured where known).
      if (op.drops_out && !gpu.attention_dropout_time_factor_by_seq.points().empty())
        arithmetic *= gpu.attention_dropout_time_factor_by_seq.at(static_cast<double>(op.dims[2]));
      // FlashAttention-2 runs a thread block per kFlashRowsPerBlock rows of a head: few blocks leave SMs
      // idle.
      if (gpu.attention_occupancy) {
        constexpr double kFlashRowsPerBlock = 128;
        const auto& o = *gpu.attention_occupancy;
        const hw::Curve& factor = op.partially_masked ? (forward ? o.causal_forward : o.causal_backward)
                                                      : (forward ? o.forward : o.backward);
        const double blocks =
            static_cast<double>(op.dims[0]) * std::ceil(static_cast<double>(op.dims[1]) / kFlashRowsPerBlock);
        arithmetic *= factor.at(blocks / gpu.gemm_tiles->streaming_multiprocessors);
      }
      break;
    }
    default:
      break;
  }
  // A kernel is bound by its arithmetic or by its memory traffic, whichever is slower (roofline).
  return gpu.kernel_launch_s + std::max(arithmetic, memory);
}

double OpTimer::eager_s(const hw::EagerCall& eager, const Op& op) const {
  // Each kernel streams its share of the bytes as an elementwise kernel does: at the measured rate of
  // the GPU's `add` where it has one (launch included), else at HBM bandwidth after a launch.
  const double kernel_bytes = static_cast<double>(op.dims[0]) * eager.bytes_per_element / eager.kernels;
  const hw::KernelRate* elementwise = measured_[static_cast<std::size_t>(Kernel::add)];
  const double kernel_s =
      elementwise ? elementwise->seconds(kernel_bytes)
                  : cluster_.gpu.kernel_launch_s + kernel_bytes / cluster_.gpu.hbm_bytes_per_second;
  return eager.kernels * kernel_s;
}

int OpTimer::group_size(const Op& op) const {
  return op.group_size > 1 ? op.group_size : degree_;
}

const hw::FabricSpec& OpTimer::fabric(const Op& op) const {
  return cluster_.fabric_of(op.group_first, group_size(op), op.group_stride);
}

double OpTimer::compute_contention(const Op& op) const {
  return is_communication(op.kind) ? fabric(op).compute_contention : 0;
}

double OpTimer::communication_s(const Op& op) const {
  // One rank has nobody to meet.
  return (group_size(op) > 1 ? fabric(op).synchronization_s : 0) + unsynchronized_s(op);
}

double OpTimer::latency_bound_s(const Op& op) const {
  const int group_size = this->group_size(op);
  if (group_size <= 1) return 0;
  return fabric(op).small_message_s(to_string(op.kind), group_size, op.size_bytes).value_or(0);
}

double OpTimer::unsynchronized_s(const Op& op) const {
  const int group_size = this->group_size(op);
  // Where bandwidth prices a collective of a few KB at a few microseconds, NCCL's launch and protocol
  // rounds take tens: the measured time of such a collective bounds it from below. The bandwidth
  // curves meet these tables without a step, since each is the larger of the two.
  const double latency_bound_s = this->latency_bound_s(op);
  if (const std::optional<double> seconds = routed_->seconds(op, group_size, degree_))
    return std::max(*seconds, latency_bound_s);
  // Too many flows to route: nccl-tests' bus bandwidth at the collective's size turns bus bytes into
  // time (bus bytes as nccl-tests' doc/PERFORMANCE.md defines them; the fabric's bus bandwidth curve is
  // nccl-tests' all-reduce measured by size); the hops' latency is the floor of small messages.
  const hw::FabricSpec& fabric = this->fabric(op);
  double bandwidth = fabric.streaming_bandwidth(op.size_bytes, measured_as(op.kind));
  if (op.kind == OpKind::all_to_all) bandwidth *= fabric.all_to_all_efficiency;
  // A point-to-point transfer crosses one link: between nodes one NIC, not the NICs of every ring. A group
  // with k GPUs in a node crosses nodes on their k NICs (k = 1: the replicas of every shard), while the
  // node's other GPUs send on theirs at once; each GPU has its share of the node's NICs. The curve was
  // measured on rings that fill their nodes, one per NIC.
  else if (&fabric == &cluster_.inter_node) {
    const int nics =
        op.kind == OpKind::send_recv ? 1 : cluster_.group_gpus_per_node(group_size, op.group_stride);
    bandwidth *=
        std::min(1.0, nics * fabric.bytes_per_second * cluster_.nic_share() / fabric.peak_bus_bandwidth());
  }
  return std::max(latency_bound_s, latency_hops(op.kind, group_size) * fabric.hop_latency_s() +
                                       op.bus_bytes / bandwidth * spine_factor(op, group_size));
}

double OpTimer::spine_factor(const Op& op, int group_size) const {
  const int g = cluster_.gpus_per_node;
  if (op.kind != OpKind::all_to_all || cluster_.spine_oversubscription <= 1 || cluster_.network ||
      op.group_stride != 1 || group_size <= g || cluster_.nics_per_node != g)
    return 1;
  // The built-in fat tree (hw_models/rail_fat_tree.hpp), one NIC per GPU, each on its rail: of what
  // a GPU sends to the n − 1 other nodes of the group, (g − 1)/g goes to other rails, up its rail's
  // spine uplink, which the n GPUs of the rail share at the cluster's N NICs' worth over the
  // oversubscription. The uplink is the bottleneck, in place of the NICs, by
  // n·(g − 1)·oversubscription / (N·g) where that is above 1.
  const double n = std::ceil(static_cast<double>(group_size) / g), gpus = g;
  return std::max(1.0, n * (gpus - 1) * cluster_.spine_oversubscription / (cluster_.num_nodes * gpus));
}

}  // namespace paradyse::costmodel
