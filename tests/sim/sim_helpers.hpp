// Hand-built clusters and programs for testing the simulator against closed forms.
#pragma once

#include <tuple>

#include <vector>

#include "hw_models/cluster.hpp"
#include "program/program.hpp"

namespace paradyse::testing {

// `nodes` nodes of `gpus` GPUs whose fabrics stream at a flat bandwidth (no size dependence):
// NVLink at `nvlink` bytes/s with `latency` per collective of one node; one NIC per GPU at `nic`.
inline hw::ClusterSpec flat_cluster(int gpus, int nodes = 1, double nvlink = 100e9, double nic = 10e9,
                                    double latency = 14e-6) {
  hw::ClusterSpec c;
  c.name = "flat";
  c.num_nodes = nodes;
  c.gpus_per_node = gpus;
  c.nics_per_node = gpus;
  c.gpu.name = "test-gpu";
  c.gpu.bf16_flops_per_second = 100e12;
  c.gpu.hbm_bytes = 80e9;
  c.gpu.hbm_bytes_per_second = 1e12;
  c.gpu.gemm_efficiency_by_flops = hw::Curve({{1, 0.5}});
  c.gpu.attention.efficiency_by_seq = hw::Curve({{1, 0.5}});
  c.gpu.attention.causal_efficiency_by_seq = hw::Curve({{1, 0.5}});
  c.gpu.kernel_launch_s = 2e-6;
  for (auto [fabric, bytes_per_second, bus_bandwidth, ranks] :
       {std::tuple{&c.intra_node, nvlink, nvlink, gpus}, {&c.inter_node, nic, nic * gpus, 2 * gpus}}) {
    fabric->bytes_per_second = bytes_per_second;
    fabric->bus_bandwidth_by_bytes = hw::Curve({{1, bus_bandwidth}});
    fabric->all_to_all_efficiency = 1.0;
    fabric->latency_s = latency;
    fabric->measured_ranks = ranks;
  }
  return c;
}

// Every rank issues one collective of `kind` on `size_bytes` and waits for it.
inline std::vector<Program> lone_collective(OpKind kind, int p, double size_bytes) {
  const double ring = static_cast<double>(p - 1) / p;
  std::vector<Program> programs(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    Program& program = programs[static_cast<std::size_t>(r)];
    program.rank = r;
    program.degree = p;
    Op op;
    op.kind = kind;
    op.stream = Stream::communication;
    op.size_bytes = size_bytes;
    op.bus_bytes = kind == OpKind::all_reduce ? 2 * ring * size_bytes
                   : kind == OpKind::broadcast || kind == OpKind::reduce || kind == OpKind::send_recv
                       ? size_bytes
                       : ring * size_bytes;
    op.group_size = static_cast<int16_t>(p);
    op.root = 0;
    op.send_to = static_cast<int16_t>((r + 1) % p);
    op.recv_from = static_cast<int16_t>((r + p - 1) % p);
    program.ops.push_back(op);
    Op wait;
    wait.kind = OpKind::wait;
    wait.deps = {0};
    program.ops.push_back(wait);
  }
  return programs;
}

}  // namespace paradyse::testing
