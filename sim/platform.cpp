#include "sim/platform.hpp"

#include <xbt/log.h>
#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>

#include <algorithm>
#include <functional>
#include <string>

#include "common/errors.hpp"

namespace paradyse::sim {
namespace sg4 = simgrid::s4u;
namespace routing = simgrid::kernel::routing;

namespace {

// SimGrid's configuration outlives its engines and cannot be set twice in a process.
void configure_once() {
  static bool configured = false;
  if (configured) return;
  configured = true;
  xbt_log_control_set("root.thresh:warning");
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:0");
}

// One direction of a link, as a route holds it.
struct Hop {
  simgrid::kernel::resource::StandardLinkImpl* link = nullptr;
  double latency_s = 0;
};

Hop hop(const sg4::Link* link) {
  return {link->get_impl(), link->get_latency()};
}

// A split-duplex link: UP from its GPU (or leaf) into the switch, DOWN back.
struct Duplex {
  Hop up, down;
};

// A zone whose routes are computed per pair when SimGrid asks (a full zone would store every pair).
// Its hosts are the GPUs in rank order, so a host's netpoint id is its rank.
class PerPairZone : public routing::NetZoneImpl {
 public:
  using routing::NetZoneImpl::NetZoneImpl;
  Hop loopback;  // SimGrid's route from a host to itself

  // The links, in order, and their latencies summed in that order, as a full zone holding the same
  // route would give them.
  void get_local_route(const routing::NetPoint* src, const routing::NetPoint* dst, routing::Route* into,
                       double* latency) override {
    const auto add = [&](const Hop& h) {
      into->link_list_.push_back(h.link);
      if (latency != nullptr) *latency += h.latency_s;
    };
    const auto a = static_cast<int>(src->id()), b = static_cast<int>(dst->id());
    if (a != b)
      route(a, b, add);
    else if (loopback.link != nullptr)
      add(loopback);
  }

 private:
  // The hops from GPU a to GPU b (a ≠ b), each passed to `add` in order.
  virtual void route(int a, int b, const std::function<void(const Hop&)>& add) const = 0;
};

// The rail-optimized cluster's built-in two-level fat tree.
class RailOptimizedZone final : public PerPairZone {
 public:
  RailOptimizedZone(const std::string& name, int gpus_per_node, int nics_per_node)
      : PerPairZone(name), gpus_per_node_(gpus_per_node), nics_per_node_(nics_per_node) {}

  std::vector<Duplex> nvlink;  // per GPU
  std::vector<Duplex> nic;     // per node and rail: node · nics_per_node + rail
  std::vector<Duplex> spine;   // per rail

 private:
  void route(int a, int b, const std::function<void(const Hop&)>& add) const override {
    if (a / gpus_per_node_ == b / gpus_per_node_) {
      add(nvlink[static_cast<std::size_t>(a)].up);
      add(nvlink[static_cast<std::size_t>(b)].down);
    } else if (rail(a) == rail(b)) {
      add(nic_of(a).up);
      add(nic_of(b).down);
    } else {
      add(nic_of(a).up);
      add(spine[static_cast<std::size_t>(rail(a))].up);
      add(spine[static_cast<std::size_t>(rail(b))].down);
      add(nic_of(b).down);
    }
  }
  int rail(int rank) const { return rank % gpus_per_node_ % nics_per_node_; }
  const Duplex& nic_of(int rank) const {
    return nic[static_cast<std::size_t>(rank / gpus_per_node_ * nics_per_node_ + rail(rank))];
  }

  int gpus_per_node_, nics_per_node_;
};

// A network described as a graph (hw::Network): each pair's route is the graph's.
class GraphZone final : public PerPairZone {
 public:
  GraphZone(const std::string& name, const hw::Network& network) : PerPairZone(name), network_(network) {}

  std::vector<Duplex> links;  // per link of the network: up from its a to its b, down back

 private:
  void route(int a, int b, const std::function<void(const Hop&)>& add) const override {
    for (const hw::RouteHop& hop : network_.route(a, b)) {
      const Duplex& link = links[static_cast<std::size_t>(hop.link)];
      add(hop.forward ? link.up : link.down);
    }
  }

  const hw::Network& network_;
};

Duplex duplex_link(sg4::NetZone* zone, const std::string& name, double bytes_per_second, double latency_s) {
  sg4::SplitDuplexLink* link = zone->create_split_duplex_link(name, bytes_per_second);
  link->set_latency(latency_s);
  link->set_sharing_policy(sg4::Link::SharingPolicy::SHARED);
  link->seal();
  return {hop(link->get_link_up()), hop(link->get_link_down())};
}

}  // namespace

Platform::Platform(const hw::ClusterSpec& cluster, int num_gpus) {
  const double oversubscription = cluster.spine_oversubscription;
  PARADYSE_CHECK(!sg4::Engine::has_instance(), "one SimGrid engine at a time in a process");
  PARADYSE_CHECK(oversubscription >= 1, "fat-tree oversubscription below 1");
  PARADYSE_CHECK(num_gpus >= 1 && num_gpus <= cluster.num_gpus(),
                 "a platform of " + std::to_string(num_gpus) + " GPUs on a cluster of " +
                     std::to_string(cluster.num_gpus()));
  engine_ = std::make_unique<sg4::Engine>("paradyse");
  configure_once();

  if (cluster.network) {
    build_graph(cluster);
    return;
  }
  const int g = cluster.gpus_per_node;
  const int nodes = (num_gpus + g - 1) / g;  // built; cluster.num_nodes for the spine
  const int nics = std::max(1, std::min(cluster.nics_per_node, g));
  auto* rails = new RailOptimizedZone(cluster.name, g, nics);  // owned by the engine, as its root zone
  sg4::NetZone* zone = rails->get_iface();

  gpus_.reserve(static_cast<std::size_t>(nodes * g));
  for (int r = 0; r < nodes * g; ++r) {
    const std::string id = std::to_string(r);
    gpus_.push_back(zone->create_host("gpu" + id, 1.0)->seal());
    PARADYSE_CHECK(gpus_.back()->get_netpoint()->id() == static_cast<unsigned long>(r),
                   "the cluster zone's hosts are its GPUs in rank order");
    rails->nvlink.push_back(duplex_link(zone, "nvlink" + id, cluster.intra_node.peak_bus_bandwidth(),
                                        cluster.intra_node.hop_latency_s() / 2));
  }
  if (nodes > 1) {
    for (int n = 0; n < nodes * nics; ++n)
      rails->nic.push_back(duplex_link(zone, "nic" + std::to_string(n), cluster.inter_node.bytes_per_second,
                                       cluster.inter_node.hop_latency_s() / 2));
    for (int rail = 0; rail < nics; ++rail)
      rails->spine.push_back(
          duplex_link(zone, "spine" + std::to_string(rail),
                      cluster.num_nodes * cluster.inter_node.bytes_per_second / oversubscription, 0));
  }
  if (const sg4::Link* loopback = sg4::Link::by_name_or_null("__loopback__")) rails->loopback = hop(loopback);
  zone->seal();
}

void Platform::build_graph(const hw::ClusterSpec& cluster) {
  const hw::Network& network = *cluster.network;
  auto* graph = new GraphZone(cluster.name, network);  // owned by the engine, as its root zone
  sg4::NetZone* zone = graph->get_iface();
  gpus_.reserve(static_cast<std::size_t>(network.num_gpus()));
  for (int r = 0; r < network.num_gpus(); ++r) {
    gpus_.push_back(zone->create_host("gpu" + std::to_string(r), 1.0)->seal());
    PARADYSE_CHECK(gpus_.back()->get_netpoint()->id() == static_cast<unsigned long>(r),
                   "the cluster zone's hosts are its GPUs in rank order");
  }
  const std::vector<hw::NetworkLink>& links = network.links();
  graph->links.reserve(links.size());
  for (std::size_t i = 0; i < links.size(); ++i)
    graph->links.push_back(
        duplex_link(zone, "link" + std::to_string(i), links[i].bytes_per_second, links[i].latency_s));
  if (const sg4::Link* loopback = sg4::Link::by_name_or_null("__loopback__")) graph->loopback = hop(loopback);
  zone->seal();
}

Platform::~Platform() = default;

}  // namespace paradyse::sim
