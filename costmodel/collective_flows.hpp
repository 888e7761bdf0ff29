// How one collective moves over the network, as NCCL does it: flows between GPUs that SimGrid then
// shares out over the links (sim/executor.cpp), or that the analytic model routes on a network graph
// (costmodel/routed_collectives.hpp). Knows nothing of SimGrid.
//
// Ring (all-gather, reduce-scatter, all-reduce): every rank streams its bus bytes to its successor on
// the ring; NCCL pipelines a ring in small chunks, so in steady state every edge carries data at once
// and one flow per edge is the ring, with its latency-bound steps added on top (latency_hops).
// Broadcast and reduce: the same ring as a pipelined chain from (to) the root. All-to-all: one flow
// per ordered pair. Send/recv: one flow per sending rank.
//
// Within one node one ring suffices (every ring uses the same NVLink ports). Across nodes NCCL runs
// one ring per NIC (channels): ring c leaves each node through a different NIC, and the rings of
// successive nodes alternate direction so that each crossing stays on one rail (NIC c−1 of node k to
// NIC c−1 of node k+1), as NCCL's rail-aligned rings do; each ring carries 1/channels of the data.
// A group of every stride-th GPU does the same over its members in each node, on their NICs.
// Inside a node the rings walk the same edges, so an edge that k rings cross is one flow of k rings'
// bytes: a ring collective over n nodes of g GPUs is about 2·n·g flows, whatever the channels (2,048
// for 1,024 GPUs, which eight separate rings would make 8,192).
#pragma once

#include <cstddef>
#include <vector>

#include "hw_models/cluster.hpp"
#include "program/program.hpp"

namespace paradyse::costmodel {

struct Flow {
  int from = 0;
  int to = 0;
  double bytes = 0;
};

struct CollectiveFlows {
  std::vector<Flow> flows;
  int latency_hops = 0;  // costmodel::latency_hops of the collective
};

// The bytes every flow of `op` is a fraction of: a ring's bus bytes, the buffer of the others.
double flow_basis_bytes(const Op& op);
// The share of its links' bandwidth a collective's flows stream at: NCCL's bus bandwidth at the op's
// size over the fabric's peak, and for an all-to-all of a group inside a node its efficiency on top (between
// nodes the network's links and their sharing are the all-to-all's cost).
double flow_efficiency(const Op& op, int group_size, const hw::FabricSpec& fabric,
                       const hw::ClusterSpec& cluster);

// Rings used by a group of ranks 0..p−1 placed on consecutive GPUs of `cluster`, or `stride` GPUs
// apart: one per NIC that the group's members in a node have between them (the k = g/stride GPUs of a
// 2-D strategy's ring over its groups have k NICs), one in rank order where a node holds a single
// member (a shard's replicas, one per shard group) or the whole group.
int ring_channels(int p, const hw::ClusterSpec& cluster, int stride = 1);
// The ranks of ring `channel` in ring order.
std::vector<int> ring_order(int p, const hw::ClusterSpec& cluster, int channel, int stride = 1);
// Flows that collective_flows would return, without building them.
std::size_t flow_count(const Op& op, int p, const hw::ClusterSpec& cluster);
// ops[r]: the collective's op on rank r (of the group Op::ranks names); all of the same kind. Flows
// go between ranks in the group.
CollectiveFlows collective_flows(const std::vector<const Op*>& ops, const hw::ClusterSpec& cluster);

}  // namespace paradyse::costmodel
