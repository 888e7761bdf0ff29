// The machine: GPUs, their memory, kernel efficiency and the fabric between them. Presets are JSON
// files under hw_models/presets/ (units in the keys, SI values, a `source` for every figure); this
// header is what the rest of paradyse sees of them. Knows nothing of strategies.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hw_models/framework.hpp"
#include "hw_models/network.hpp"

namespace paradyse::hw {

// A measured curve, y against x; read between points linearly in log(x), clamped at both ends.
class Curve {
 public:
  Curve() = default;
  explicit Curve(std::vector<std::pair<double, double>> points);  // x strictly increasing, y > 0
  double at(double x) const;
  double highest() const;  // the largest y; 0 for no points
  const std::vector<std::pair<double, double>>& points() const { return points_; }

 private:
  std::vector<std::pair<double, double>> points_;
};

// A measured rate of one backend call (a kernel on a GPU, several passes on a CPU), by its size in
// the unit the rate counts: FLOPs for GEMM-like calls, bytes read and written for the others, as
// the tracer counts them. A call takes size / rate(size), and never less than the smallest measured
// call took (its fixed costs do not shrink below the sizes measured).
struct KernelRate {
  bool by_flops = false;  // flops_per_second_by_flops; else bytes_per_second_by_bytes
  Curve rate;
  double seconds(double size) const;
};

// A GEMM as cuBLAS runs it on a GPU: the output split into tiles, one thread block each, run by the
// SMs in waves (NVIDIA, Matrix Multiplication Background User's Guide, section 3); costmodel/op_time
// prices a GEMM of shape (M, N, K) from it.
struct GemmTiles {
  int streaming_multiprocessors = 0;
  double peak_efficiency = 0;  // fraction of the peak an SM reaches in a tile's main loop
  double setup_k = 0;          // a tile's prologue and epilogue, in steps of its main loop over K
};

struct GpuSpec {
  std::string name;
  double bf16_flops_per_second = 0;  // dense tensor-core peak
  double hbm_bytes = 0;
  double hbm_bytes_per_second = 0;  // achievable copy bandwidth, for memory-bound kernels
  // Exactly one of the two: GEMMs by shape on a GPU, or a measured curve by FLOPs (a calibrated CPU).
  std::optional<GemmTiles> gemm_tiles;
  Curve gemm_efficiency_by_flops;  // fraction of peak reached by one GEMM of that many FLOPs
  // A fused attention kernel on this GPU, fractions of peak by key length (FLOPs as
  // common/attention_flops.hpp counts them): forward and backward together, without and with a causal
  // mask; and, where measured apart, the forward alone (empty: not measured, the forward then runs at
  // the pair's rate). The backward takes the rest of the pair's time: a forward faster than the pair
  // leaves a backward slower than it, so a step without recomputation costs what the pair measured,
  // and a recomputed forward costs what the forward does.
  struct AttentionCurves {
    Curve efficiency_by_seq, causal_efficiency_by_seq;
    Curve forward_efficiency_by_seq, causal_forward_efficiency_by_seq;
    double efficiency(bool causal, bool forward, double seq) const;
  };
  AttentionCurves attention;  // the GPU's own kernel (FlashAttention-2 on the GPU presets)
  // Optional ("attention_implementations"): other fused attention kernels a framework may run in place
  // of the GPU's own, each by its own curves on this GPU, by name ("flash-attention-triton"). A
  // cluster runs one (ClusterSpec).
  std::map<std::string, AttentionCurves, std::less<>> attention_implementations;
  // FlashAttention with dropout on the probabilities over without, time ratio by key length; empty: 1
  // (no measurement).
  Curve attention_dropout_time_factor_by_seq;
  // Optional ("attention_time_factor_by_blocks_per_sm"): FlashAttention on few thread blocks (one per
  // 128 rows of a head) over its time at the efficiency curves' configuration, by blocks per SM,
  // forward and backward, with and without a causal mask; absent: 1 (no measurement). Needs
  // gemm_tiles' SM count.
  struct AttentionOccupancy {
    Curve forward, backward, causal_forward, causal_backward;
  };
  std::optional<AttentionOccupancy> attention_occupancy;
  double kernel_launch_s = 0;          // fixed cost of every kernel
  double reserved_bytes = 0;           // CUDA context and NCCL buffers: never available to tensors
  double allocator_fragmentation = 0;  // fraction the caching allocator holds beyond live tensors
  // Optional (0: none, and no activation offload): the GPU's copies to and from pinned host memory,
  // bytes/s each way while every GPU of the node copies at once, and the host memory that holds one
  // GPU's offloaded activations (its node's memory over its GPUs, less what the host keeps for itself).
  double host_link_bytes_per_second = 0;
  double host_memory_bytes = 0;
  // Optional ("kernels"): measured rates of backend calls by their name (Backend's method), which
  // replace the roofline for those calls; paradyse calibrate measures them on a CPU.
  std::map<std::string, KernelRate> kernel_rates;
};

// One level of the fabric: NVLink through NVSwitch inside a node, or the NICs between nodes.
struct FabricSpec {
  double bytes_per_second = 0;       // per GPU per direction, datasheet
  Curve bus_bandwidth_by_bytes;      // NCCL ring all-reduce bus bandwidth (bytes/s) by message bytes
  double all_to_all_efficiency = 0;  // all-to-all bus bandwidth as a fraction of the ring's
  double latency_s = 0;              // smallest time of any collective or transfer at this level
  int measured_ranks = 0;            // the all-reduce group of the curve: one node inside, two between
  // All-gather and reduce-scatter over measured_ranks, bus bandwidth ((g−1)/g · size / time) by the
  // collective's size, as nccl-tests' all_gather_perf and reduce_scatter_perf report it. Optional:
  // empty, they stream as the all-reduce does (NCCL runs all three as the same rings); a CPU backend's
  // are their own (Gloo has its own all-gather, and no reduce-scatter: an all-to-all, then a sum).
  Curve all_gather_bus_bandwidth_by_bytes, reduce_scatter_bus_bandwidth_by_bytes;
  // A point-to-point exchange, every rank sending to one peer while it receives from another (a
  // ring's step): the bytes one rank sends per second, by their size. Optional: empty, it streams as
  // the all-reduce does (NCCL's send and receive run on the same channels); a CPU backend's is its
  // own (Gloo's pairs, not its all-reduce algorithm).
  Curve send_recv_bandwidth_by_bytes;
  // The share of a GPU's compute rate that a collective over this fabric takes while it is in flight
  // on that GPU (NCCL's kernels hold SMs; on a CPU, Gloo's threads run on the ranks' cores): the
  // compute stream runs at 1 − this meanwhile. Optional, in [0, 1); absent, 0.
  double compute_contention = 0;
  // What a collective or transfer takes beyond its own time when its ranks reach it from computing,
  // as a step's ranks do, rather than back to back as a bandwidth test runs them: the ranks arrive
  // apart, and threads that slept while they computed wake to run it (on a CPU, Gloo's worker and I/O
  // threads, on the cores the ranks compute on). The mean over a chain of compute and collectives.
  // Optional, seconds; absent, 0.
  double synchronization_s = 0;
  // Optional ("small_message_seconds_by_bytes"): the time of collectives of a few hundred KB or less,
  // where NCCL's latency, not the bandwidth of the links, sets it (nccl-tests, one point per size): by
  // the collective's name (all_reduce, all_gather, ...), then by the group's rank count, seconds by
  // the collective's size as nccl-tests counts it. A collective takes at least this long.
  std::map<std::string, std::map<int, Curve>, std::less<>> small_message_s_by_bytes;

  // The measured time of a small `collective` over `ranks` GPUs: its own table, else the all-reduce's
  // (NCCL's floor is a kernel launch and a few protocol rounds for every collective; a send_recv
  // takes only its own); between two measured
  // rank counts, read linearly, outside them the nearest; past the table's largest size, its last
  // time. nullopt where the fabric has no table.
  std::optional<double> small_message_s(std::string_view collective, int ranks, double size_bytes) const;

  // Which collective's measurements a time is read from.
  enum class Collective : uint8_t { all_reduce, all_gather, reduce_scatter, send_recv };

  double peak_bus_bandwidth() const;  // the all-reduce curve's highest point
  // A ring all-reduce over measured_ranks crosses 2(g−1) hops, and latency_s is its floor.
  double hop_latency_s() const;
  // The rate at which a collective of `size_bytes` streams once its hops' latency is set apart: the
  // measured time of `collective` at that size minus its hops' latency (2(g−1) for an all-reduce,
  // 1 for a send_recv, g−1 for the others), so that hops · hop latency + bus bytes / streaming bandwidth
  // gives back the measured time; at most the measured curve's peak.
  double streaming_bandwidth(double size_bytes, Collective collective = Collective::all_reduce) const;
};

// A calibrated machine's speed when it was measured (`paradyse calibrate`): the seconds of one fixed
// piece of a step (real_backend/machine_speed.hpp) before its first figure and after its last.
// validate times the same piece around each run, to show how far the machine has drifted since.
struct CalibrationReference {
  double start_s = 0, end_s = 0;
  double seconds() const { return (start_s + end_s) / 2; }
};

struct ClusterSpec {
  std::string name;         // "dgx-a100", or "dgx-a100 x4" for four nodes
  std::string description;  // one line on the node, from the preset
  std::string source;       // the file or preset it was read from: "preset dgx-a100" or the path
  int num_nodes = 1;
  int gpus_per_node = 0;
  GpuSpec gpu;
  // How the host issues the step's calls: the framework the cluster names ("framework"), or its own
  // "host" block; with neither, ops issue at no cost. --framework replaces it (use_framework).
  HostSpec host;
  std::string framework;  // the name of the framework `host` came from; "" for the cluster's own
  std::map<std::string, EagerCall> eager_calls;  // the framework's (FrameworkSpec::eager_calls)
  // The fused attention kernel the step runs: one of gpu.attention_implementations, or "" for the one
  // the GPU's own curves measure (use_attention_implementation).
  std::string attention_implementation;

  std::optional<CalibrationReference> calibration;  // optional "calibration" block
  FabricSpec intra_node;
  FabricSpec inter_node;
  int nics_per_node = 0;
  // The network as a graph, when the cluster file describes one ("network"); otherwise the
  // simulator builds its rail-optimised two-level fat tree (sim/platform.hpp).
  std::shared_ptr<const Network> network;
  // Without a network graph: the built-in fat tree's leaf-to-spine uplinks carry a leaf's NIC
  // bandwidth over this (1: non-blocking). A what-if, set by simulate --oversubscription or a sweep;
  // the simulator builds it, the analytic model prices an all-to-all across nodes by it.
  double spine_oversubscription = 1;
  // Without a network graph: the nodes of a pod (a DGX SuperPOD's scalable unit), whose leaves share
  // one spine group; a cluster of more nodes joins its pods through a core, three levels
  // (rail_fat_tree.hpp). 0: one spine for every node, two levels.
  int pod_nodes = 0;

  int num_gpus() const { return num_nodes * gpus_per_node; }
  // The fused attention kernel the step runs, by its curves.
  const GpuSpec::AttentionCurves& attention_curves() const {
    return attention_implementation.empty() ? gpu.attention
                                            : gpu.attention_implementations.at(attention_implementation);
  }
  // The fabric a group of GPUs first_gpu, first_gpu + stride, … (gpus of them) communicates over: the
  // NICs when it spans nodes, else NVLink.
  const FabricSpec& fabric_of(int first_gpu, int gpus, int stride = 1) const {
    const bool spans = first_gpu / gpus_per_node != (first_gpu + (gpus - 1) * stride) / gpus_per_node;
    return spans ? inter_node : intra_node;
  }
  // How many of such a group's GPUs share a node: 1 when the stride reaches past a node (the replicas of
  // a hybrid-sharded shard, one per node), gpus_per_node / stride for a stride inside one (a 2-D
  // strategy's ring, every t-th GPU). Each reaches other nodes through its own NIC, so a group with k
  // GPUs in a node crosses nodes on k NICs, not on all of them.
  int group_gpus_per_node(int gpus, int stride) const {
    if (stride >= gpus_per_node) return 1;
    return std::max(1, std::min(gpus, gpus_per_node / std::max(1, stride)));
  }
  // A GPU's share of its node's NICs when every GPU of the node sends across nodes at once.
  double nic_share() const {
    return std::min(1.0, static_cast<double>(std::max(1, nics_per_node)) / std::max(1, gpus_per_node));
  }
  // Bytes a rank may allocate for tensors: HBM minus what CUDA and NCCL reserve.
  double tensor_capacity_bytes() const { return gpu.hbm_bytes - gpu.reserved_bytes; }
  // Whether a rank that holds `peak_bytes` on its GPU and `host_peak_bytes` of offloaded activations in
  // host memory fits.
  bool holds(double peak_bytes, double host_peak_bytes) const {
    return peak_bytes <= tensor_capacity_bytes() && host_peak_bytes <= gpu.host_memory_bytes;
  }
};

// Throws InputError naming "oversubscription" when the cluster's spine_oversubscription is below 1, or
// other than 1 on a cluster that describes its network as a graph.
void check_spine_oversubscription(const ClusterSpec& cluster);

// `name_or_path` is a preset name (see cluster_preset_names) or a path to a JSON file of the same
// schema. `num_nodes` replicates the node (multi-node variants); throws InputError on bad input.
ClusterSpec load_cluster(const std::string& name_or_path, int num_nodes = 1);
std::vector<std::string> cluster_preset_names();  // sorted
// The cluster's host issues calls as `framework` does (--framework).
void use_framework(ClusterSpec& cluster, const FrameworkSpec& framework);
// The step runs the GPU's attention implementation `name` (--attention-implementation); "" for the
// GPU's own curves. Throws InputError naming `field` and the implementations the GPU has otherwise.
void use_attention_implementation(ClusterSpec& cluster, const std::string& name, const std::string& field);
// A preset's JSON text as embedded in the binary, the starting point of a custom cluster file;
// throws InputError if `name` is no preset.
std::string_view cluster_preset_text(const std::string& name);

}  // namespace paradyse::hw
