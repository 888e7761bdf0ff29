// Collectives priced on the cluster's network (hw::Topology: its file's graph, or the built-in rail
// fat tree) as the simulator moves them: the collective's flows (collective_flows.hpp) on the
// network's routes, every link carrying the bytes of each flow that crosses it at its bandwidth per
// direction. The collective streams for as long as its most loaded link needs, and pays its longest
// route's latency plus its algorithm's other latency-bound steps. Rings whose members share a NIC, an
// all-to-all up an oversubscribed spine, a slow link on a route: each is seen where the bytes cross
// it. Inside a node this is the bus-bandwidth formula exactly: every GPU's NVLink link carries its
// bus bytes at the measured rate.
//
// Every rank runs the same program, so a collective of part of the job (a TP group, a ring across
// the TP groups) runs at once in each of its sibling groups: the translates of its group that
// partition the job's ranks. Their flows are routed together, as they share NICs and uplinks.
// That is the simulator's time when nothing else runs: SimGrid shares a link fairly, so the flows
// through the most loaded link end last, and the strategies' collectives load their links evenly.
// Beside other kinds of traffic (a TP collective on the NVLink a ring also crosses) the simulator is
// slower; this model does not see other ops.
//
// A point-to-point op is priced as a shift by one over its group, every member sending to the next
// at once: the ring attention's pattern, the only transfers the strategies make.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "hw_models/cluster.hpp"
#include "program/backend.hpp"
#include "program/program.hpp"

namespace paradyse::costmodel {

class RoutedCollectiveTimer {
 public:
  explicit RoutedCollectiveTimer(hw::ClusterSpec cluster);

  // Seconds of collective `op` over its group of `group_size` ranks in a job of `degree` ranks; none
  // when it and its siblings have more flows than are worth routing one by one (max_flows), where
  // the bus-bandwidth formula prices it. Thread-safe: a group's link loads are computed once and kept.
  std::optional<double> seconds(const Op& op, int group_size, int degree) const;

  static constexpr std::size_t max_flows = std::size_t{1} << 18;  // a 512-rank all-to-all

 private:
  // A group's flows per byte of flow_basis_bytes: the most loaded link's seconds, and the longest
  // route's latency.
  struct Load {
    double seconds_per_byte = 0;
    double route_latency_s = 0;
  };
  // None: more flows than max_flows.
  std::optional<Load> load(const Op& op, const RankSet& group, int degree) const;

  hw::ClusterSpec cluster_;
  mutable std::shared_ptr<const hw::Topology> topology_;  // all of the cluster's nodes, made on first use
  mutable std::mutex mutex_;
  // (kind, first rank, ranks, stride, root, degree) → its load
  mutable std::map<std::tuple<OpKind, int, int, int, int, int>, std::optional<Load>> loads_;
};

}  // namespace paradyse::costmodel
