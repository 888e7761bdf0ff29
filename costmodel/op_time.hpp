// Seconds of one traced op on a cluster: a backend call the cluster measured (its `kernels`) at its
// measured rate; otherwise GEMMs and attention at size-dependent efficiency, memory-bound kernels at
// HBM copy bandwidth, collectives and transfers by the α–β model over NCCL's measured bus
// bandwidth by message size (nccl-tests' all_reduce_perf, as each preset's source says): a collective
// takes its ring's hops times the fabric's hop latency plus its bus bytes at the fabric's streaming
// bandwidth for its size, on the links of the cluster's network that its flows and its sibling groups'
// flows cross (routed_collectives.hpp).
// Where there are too many flows to route one by one (all-to-alls over hundreds of ranks), a formula
// stands in for the network: each GPU's share of its node's NICs, an oversubscribed spine's uplinks.
#pragma once

#include <array>
#include <memory>

#include "costmodel/routed_collectives.hpp"
#include "hw_models/cluster.hpp"
#include "program/program.hpp"

namespace paradyse::costmodel {

// Latency-bound steps of NCCL's algorithm for a collective over p ranks: p−1 ring steps for
// all-gather and reduce-scatter, 2(p−1) for all-reduce, p−1 pipeline stages for broadcast and
// reduce, one for all-to-all (all pairs at once) and for a point-to-point transfer.
int latency_hops(OpKind kind, int p);
// Whose measurements a collective's time is read from: its own for all-gather and reduce-scatter
// (where the fabric has them), the all-reduce's for the rest.
hw::FabricSpec::Collective measured_as(OpKind kind);

// Seconds of the arithmetic of `batch` GEMMs of [m, k]·[k, n] on `gpu` (not its launch, nor its
// memory traffic). With gemm_tiles, as cuBLAS runs them: the outputs split into tiles of one of
// its large shapes (256×128, 128×256, 128×128, 128×64, 64×128), a tile per thread block and per SM
// at a time, the SMs running the tiles in waves, each tile taking its main loop over k plus its
// prologue and epilogue (setup_k more steps) at peak_efficiency of an SM's share of the peak; the
// tile shape that finishes first (NVIDIA, Matrix Multiplication Background User's Guide: tile
// quantisation at the matrix edges, wave quantisation in the last wave). Otherwise FLOPs over the
// peak times gemm_efficiency_by_flops.
double gemm_arithmetic_s(const hw::GpuSpec& gpu, int64_t batch, int64_t m, int64_t n, int64_t k);

class OpTimer {
 public:
  // `degree` ranks form the group (a collective's own group, where it records one, decides its fabric:
  // one wider than a node goes over the NICs). Throws InputError when the cluster measures a kernel
  // that is no backend call. `routed` prices the collectives (one is made where none is given;
  // share one to route each group once).
  OpTimer(const hw::ClusterSpec& cluster, int degree,
          std::shared_ptr<const RoutedCollectiveTimer> routed = nullptr);

  double seconds(const Op& op) const;
  // Host time to issue `op` (cluster.host): none for a stream wait.
  double dispatch_s(const Op& op) const;
  // Host time to issue each op of `program`, in its order: dispatch_s, but where the host has a
  // framework's layer calls (hw::LayerCalls), a layer phase's compute ops share that phase's calls
  // (by its direction and its rerun) evenly, as the host issues them between the same collectives.
  std::vector<double> issue_s(const Program& program) const;
  bool synchronous_host() const { return cluster_.host.synchronous; }
  // A copy between device and host memory (activation offload): its bytes over the GPU's host link;
  // InputError where the cluster gives none.
  double host_copy_s(const Op& op) const;
  // A compute op's time: its recorded duration_s where it has one, else its price.
  double compute_s(const Op& op) const;
  // A collective's or transfer's time: its fabric's synchronization_s, then its hops and bytes, and at
  // least its latency-bound time.
  double communication_s(const Op& op) const;
  // The least time of a collective or transfer of few bytes, as measured on its fabric
  // (FabricSpec::small_message_s), less its fabric's synchronization_s; 0 where the fabric has no
  // measurement or the group is one rank.
  double latency_bound_s(const Op& op) const;
  // The share of the compute stream's rate that `op` takes while it is in flight (its fabric's
  // compute_contention); 0 for an op that is no communication.
  double compute_contention(const Op& op) const;

 private:
  int group_size(const Op& op) const;  // its own group's, or else the degree's
  // A call the framework runs as eager kernels (hw::EagerCall), by the bytes they move.
  double eager_s(const hw::EagerCall& eager, const Op& op) const;
  double unsynchronized_s(const Op& op) const;  // communication_s less its fabric's synchronization_s
  // How much slower than its NICs a collective streams behind an oversubscribed spine.
  double spine_factor(const Op& op, int group_size) const;
  const hw::FabricSpec& fabric(const Op& op) const;
  const hw::ClusterSpec& cluster_;
  int degree_;
  std::shared_ptr<const RoutedCollectiveTimer> routed_;
  std::array<const hw::KernelRate*, kKernelCount> measured_{};   // by Kernel; null: the roofline
  std::array<const hw::EagerCall*, kKernelCount> eager_{};       // by Kernel; null: the fused call
  std::array<double, kKernelCount> dispatch_s_{};                // by Kernel: the host's cost to issue it
  std::array<double, kOpKindCount> communication_dispatch_s_{};  // by OpKind, for communication
};

}  // namespace paradyse::costmodel
