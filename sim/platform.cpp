#include "sim/platform.hpp"

#include <xbt/log.h>
#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>

#include <algorithm>
#include <csignal>
#include <functional>
#include <memory>
#include <string>

#include "common/errors.hpp"
#include "hw_models/rail_fat_tree.hpp"

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

// A cluster's network (hw::Topology): each pair's route is the topology's.
class TopologyZone final : public PerPairZone {
 public:
  TopologyZone(const std::string& name, std::shared_ptr<const hw::Topology> topology)
      : PerPairZone(name), topology_(std::move(topology)) {}

  std::vector<Duplex> links;  // per link of the topology: up from its a to its b, down back

 private:
  void route(int a, int b, const std::function<void(const Hop&)>& add) const override {
    for (const hw::RouteHop& hop : topology_->route(a, b)) {
      const Duplex& link = links[static_cast<std::size_t>(hop.link)];
      add(hop.forward ? link.up : link.down);
    }
  }

  std::shared_ptr<const hw::Topology> topology_;
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
  // SimGrid's own Ctrl-C handler prints its state and exits 1; interrupted, paradyse ends as any
  // program does (the shell's 130), leaving nothing under its outputs' final names.
  std::signal(SIGINT, SIG_DFL);
  configure_once();

  // Only the nodes the job uses, of the built-in fat tree; all of a graph's.
  const int nodes = (num_gpus + cluster.gpus_per_node - 1) / cluster.gpus_per_node;
  const std::shared_ptr<const hw::Topology> topology = hw::cluster_topology(cluster, nodes);
  auto* zone_impl = new TopologyZone(cluster.name, topology);  // owned by the engine, as its root zone
  sg4::NetZone* zone = zone_impl->get_iface();
  gpus_.reserve(static_cast<std::size_t>(topology->num_gpus()));
  for (int r = 0; r < topology->num_gpus(); ++r) {
    gpus_.push_back(zone->create_host("gpu" + std::to_string(r), 1.0)->seal());
    PARADYSE_CHECK(gpus_.back()->get_netpoint()->id() == static_cast<unsigned long>(r),
                   "the cluster zone's hosts are its GPUs in rank order");
  }
  const std::vector<hw::NetworkLink>& links = topology->links();
  zone_impl->links.reserve(links.size());
  for (std::size_t i = 0; i < links.size(); ++i)
    zone_impl->links.push_back(
        duplex_link(zone, "link" + std::to_string(i), links[i].bytes_per_second, links[i].latency_s));
  if (const sg4::Link* loopback = sg4::Link::by_name_or_null("__loopback__"))
    zone_impl->loopback = hop(loopback);
  zone->seal();
}

Platform::~Platform() = default;

}  // namespace paradyse::sim
