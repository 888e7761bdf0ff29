#include "costmodel/collective_flows.hpp"

#include <algorithm>
#include <numeric>

#include "common/errors.hpp"
#include "costmodel/op_time.hpp"

namespace paradyse::costmodel {

double flow_basis_bytes(const Op& op) {
  const bool ring =
      op.kind == OpKind::all_gather || op.kind == OpKind::reduce_scatter || op.kind == OpKind::all_reduce;
  return ring ? op.bus_bytes : op.size_bytes;
}

double flow_efficiency(const Op& op, int group_size, const hw::FabricSpec& fabric,
                       const hw::ClusterSpec& cluster) {
  double efficiency =
      fabric.streaming_bandwidth(op.size_bytes, measured_as(op.kind)) / fabric.peak_bus_bandwidth();
  if (op.kind == OpKind::all_to_all && group_size <= cluster.gpus_per_node)
    efficiency *= fabric.all_to_all_efficiency;
  return efficiency;
}

namespace {

// Members of a p-rank group `stride` GPUs apart that share a node, where every node holds as many
// (the stride divides the node); 1 otherwise, as for a GPU per node.
int members_per_node(const hw::ClusterSpec& cluster, int p, int stride) {
  return cluster.gpus_per_node % stride == 0 ? cluster.group_gpus_per_node(p, stride) : 1;
}

}  // namespace

int ring_channels(int p, const hw::ClusterSpec& cluster, int stride) {
  const int k = members_per_node(cluster, p, stride);
  if (p <= k || k == 1) return 1;
  // One ring per NIC the node's members have between them: member j is on rail j·stride mod NICs.
  const int nics = std::max(1, cluster.nics_per_node);
  return std::min(k, nics / std::gcd(nics, stride));
}

std::vector<int> ring_order(int p, const hw::ClusterSpec& cluster, int channel, int stride) {
  const int k = members_per_node(cluster, p, stride);
  std::vector<int> order;
  order.reserve(static_cast<std::size_t>(p));
  if (p <= k || k == 1) {
    for (int r = 0; r < p; ++r) order.push_back(r);
    return order;
  }
  for (int first = 0, node = 0; first < p; first += k, ++node) {
    const int local = std::min(k, p - first);
    // Even nodes enter on member c and walk up, leaving on c−1; odd nodes enter on c−1 and walk down,
    // leaving on c: every crossing joins the same local member (the same rail) on both sides.
    const bool up = node % 2 == 0;
    const int start = ((up ? channel : channel - 1) % local + local) % local;
    for (int i = 0; i < local; ++i)
      order.push_back(first + ((up ? start + i : start - i) % local + local) % local);
  }
  return order;
}

namespace {

// The edges of the rings of a group of p ranks, each once, in the order the rings first cross them,
// with how many rings cross it. Inside a node every ring walks the same way (up on even nodes, down
// on odd ones), so the rings share all but one of each node's edges: eight rings of 1,024 ranks cross
// 2,048 distinct edges (1,024 inside nodes, 1,024 between them), not 8,192.
struct RingEdge {
  int from, to, rings;
};
std::vector<RingEdge> ring_edges(int p, const hw::ClusterSpec& cluster, int stride) {
  const int rings = ring_channels(p, cluster, stride);
  std::vector<RingEdge> edges;
  std::vector<std::vector<std::pair<int, std::size_t>>> out(
      static_cast<std::size_t>(p));  // from → (to, edge)
  for (int c = 0; c < rings; ++c) {
    const std::vector<int> order = ring_order(p, cluster, c, stride);
    for (int i = 0; i < p; ++i) {
      const int from = order[static_cast<std::size_t>(i)], to = order[static_cast<std::size_t>((i + 1) % p)];
      auto& known = out[static_cast<std::size_t>(from)];
      const auto found =
          std::find_if(known.begin(), known.end(), [&](const auto& e) { return e.first == to; });
      if (found != known.end()) {
        ++edges[found->second].rings;
        continue;
      }
      known.emplace_back(to, edges.size());
      edges.push_back({from, to, 1});
    }
  }
  return edges;
}

}  // namespace

std::size_t flow_count(const Op& op, int p, const hw::ClusterSpec& cluster) {
  const auto rings = static_cast<std::size_t>(ring_channels(p, cluster, op.group_stride));
  const auto n = static_cast<std::size_t>(p);
  switch (op.kind) {
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_reduce:
      return rings == 1 ? n : ring_edges(p, cluster, op.group_stride).size();
    case OpKind::broadcast:
    case OpKind::reduce:
      return rings * (n - 1);
    case OpKind::all_to_all:
      return n * (n - 1);
    case OpKind::send_recv:
      return n;
    default:
      return 0;
  }
}

CollectiveFlows collective_flows(const std::vector<const Op*>& ops, const hw::ClusterSpec& cluster) {
  const int p = static_cast<int>(ops.size());
  PARADYSE_CHECK(p >= 1, "a collective without ranks");
  const Op& op = *ops.front();
  CollectiveFlows result;
  result.latency_hops = latency_hops(op.kind, p);
  const int rings = ring_channels(p, cluster, op.group_stride);
  auto& flows = result.flows;
  flows.reserve(flow_count(op, p, cluster));
  switch (op.kind) {
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_reduce:
      // One flow per edge, carrying the bytes of every ring that crosses it: rings that share an
      // edge share its links alike.
      for (const RingEdge& edge : ring_edges(p, cluster, op.group_stride))
        flows.push_back({edge.from, edge.to,
                         flow_basis_bytes(*ops[static_cast<std::size_t>(edge.from)]) * edge.rings / rings});
      break;
    case OpKind::broadcast:
    case OpKind::reduce: {
      PARADYSE_CHECK(op.root >= 0 && op.root < p, "broadcast or reduce without a root in the group");
      for (int c = 0; c < rings; ++c) {
        std::vector<int> order = ring_order(p, cluster, c, op.group_stride);
        std::rotate(order.begin(), std::find(order.begin(), order.end(), op.root), order.end());
        for (int i = 0; i + 1 < p; ++i) {
          const int near = order[static_cast<std::size_t>(i)], far = order[static_cast<std::size_t>(i + 1)];
          if (op.kind == OpKind::broadcast)
            flows.push_back({near, far, flow_basis_bytes(op) / rings});
          else
            flows.push_back({far, near, flow_basis_bytes(op) / rings});
        }
      }
      break;
    }
    case OpKind::all_to_all:
      for (int from = 0; from < p; ++from)
        for (int to = 0; to < p; ++to)
          if (from != to)
            flows.push_back({from, to, flow_basis_bytes(*ops[static_cast<std::size_t>(from)]) / p});
      break;
    case OpKind::send_recv:
      for (int from = 0; from < p; ++from) {
        const Op& send = *ops[static_cast<std::size_t>(from)];
        if (send.send_to < 0) continue;
        PARADYSE_CHECK(send.send_to < p && ops[static_cast<std::size_t>(send.send_to)]->recv_from == from,
                       "rank " + std::to_string(from) + " sends to rank " + std::to_string(send.send_to) +
                           ", which does not receive from it in the same step");
        flows.push_back({from, send.send_to, flow_basis_bytes(send)});
      }
      break;
    default:
      PARADYSE_CHECK(false, "collective_flows of a " + std::string(to_string(op.kind)) + " op");
  }
  return result;
}

}  // namespace paradyse::costmodel
