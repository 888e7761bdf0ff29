#include "costmodel/routed_collectives.hpp"

#include <algorithm>
#include <vector>

#include "common/errors.hpp"
#include "costmodel/collective_flows.hpp"
#include "costmodel/op_time.hpp"
#include "hw_models/rail_fat_tree.hpp"
#include "program/backend.hpp"

namespace paradyse::costmodel {

RoutedCollectiveTimer::RoutedCollectiveTimer(hw::ClusterSpec cluster) : cluster_(std::move(cluster)) {}

namespace {

// The first ranks of the translates of `group` that partition ranks 0..degree−1, in rank order; just
// the group's own where its translates do not partition them.
std::vector<int> sibling_firsts(const RankSet& group, int degree) {
  std::vector<char> covered(static_cast<std::size_t>(std::max(degree, 0)), 0);
  std::vector<int> firsts;
  for (int r = 0; r < degree; ++r) {
    if (covered[static_cast<std::size_t>(r)]) continue;
    const RankSet sibling{r, group.size, group.stride};
    if (!sibling.within(degree)) return {group.first};
    for (int i = 0; i < group.size; ++i) {
      char& member = covered[static_cast<std::size_t>(sibling.rank(i))];
      if (member) return {group.first};
      member = 1;
    }
    firsts.push_back(r);
  }
  if (std::find(firsts.begin(), firsts.end(), group.first) == firsts.end()) return {group.first};
  return firsts;
}

}  // namespace

std::optional<double> RoutedCollectiveTimer::seconds(const Op& op, int group_size, int degree) const {
  const RankSet group{op.group_first, group_size, op.group_stride};
  const std::optional<Load> load = this->load(op, group, degree);
  if (!load) return std::nullopt;
  const hw::FabricSpec& fabric = cluster_.fabric_of(group.first, group.size, group.stride);
  const double streaming_s =
      load->seconds_per_byte * flow_basis_bytes(op) / flow_efficiency(op, group.size, fabric, cluster_);
  return load->route_latency_s + std::max(0, latency_hops(op.kind, group.size) - 1) * fabric.hop_latency_s() +
         streaming_s;
}

std::optional<RoutedCollectiveTimer::Load> RoutedCollectiveTimer::load(const Op& op, const RankSet& group,
                                                                       int degree) const {
  const int root = op.kind == OpKind::broadcast || op.kind == OpKind::reduce ? op.root : -1;
  const auto key = std::make_tuple(op.kind, group.first, group.size, group.stride, root, degree);
  {
    const std::lock_guard lock(mutex_);
    if (const auto found = loads_.find(key); found != loads_.end()) return found->second;
  }
  const std::vector<int> firsts = sibling_firsts(group, degree);
  // Siblings that partition the job load the links together, so each of them has the load of all: kept
  // under the first sibling's key too, it is routed once for all of them (a job of thousands of nodes
  // has as many node groups).
  const auto first_key = std::make_tuple(op.kind, firsts.front(), group.size, group.stride, root, degree);
  if (firsts.front() != group.first) {
    const std::lock_guard lock(mutex_);
    if (const auto found = loads_.find(first_key); found != loads_.end())
      return loads_.emplace(key, found->second).first->second;
  }
  const auto keep = [&](const std::optional<Load>& load) {
    const std::lock_guard lock(mutex_);
    loads_.emplace(first_key, load);
    return loads_.emplace(key, load).first->second;
  };
  if (firsts.size() * flow_count(op, group.size, cluster_) > max_flows) return keep(std::nullopt);
  // Every member's op, of one byte of flow basis: the loads scale with the bytes.
  std::vector<Op> members(static_cast<std::size_t>(group.size), op);
  for (int i = 0; i < group.size; ++i) {
    Op& member = members[static_cast<std::size_t>(i)];
    member.bus_bytes = member.size_bytes = 1;
    member.group_size = static_cast<int16_t>(group.size);
    if (op.kind == OpKind::send_recv) {
      member.send_to = static_cast<int16_t>((i + 1) % group.size);
      member.recv_from = static_cast<int16_t>((i + group.size - 1) % group.size);
    }
  }
  std::vector<const Op*> ops;
  for (const Op& member : members) ops.push_back(&member);
  const std::vector<Flow> flows = collective_flows(ops, cluster_).flows;

  std::shared_ptr<const hw::Topology> topology;
  {
    // Built on the first collective routed: the simulator routes here only those past its flow limit.
    const std::lock_guard lock(mutex_);
    if (!topology_) topology_ = hw::cluster_topology(cluster_, cluster_.num_nodes);
    topology = topology_;
  }
  const std::vector<hw::NetworkLink>& links = topology->links();
  // Bytes per link and direction. A group's flows touch few of a large fabric's links: the array is
  // kept, and only the entries the last call touched are zeroed.
  thread_local std::vector<double> bytes;
  thread_local std::vector<std::size_t> touched;
  for (const std::size_t e : touched) bytes[e] = 0;
  touched.clear();
  if (bytes.size() < 2 * links.size()) bytes.assign(2 * links.size(), 0);
  Load load;
  for (const int first : firsts) {
    const RankSet sibling{first, group.size, group.stride};
    for (const Flow& flow : flows) {
      double latency_s = 0;
      for (const hw::RouteHop& hop : topology->route(sibling.rank(flow.from), sibling.rank(flow.to))) {
        const std::size_t e = 2 * static_cast<std::size_t>(hop.link) + (hop.forward ? 0 : 1);
        if (bytes[e] == 0) touched.push_back(e);
        bytes[e] += flow.bytes;
        latency_s += links[static_cast<std::size_t>(hop.link)].latency_s;
      }
      load.route_latency_s = std::max(load.route_latency_s, latency_s);
    }
  }
  for (const std::size_t e : touched)
    load.seconds_per_byte = std::max(load.seconds_per_byte, bytes[e] / links[e / 2].bytes_per_second);
  return keep(load);
}

}  // namespace paradyse::costmodel
