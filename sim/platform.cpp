#include "sim/platform.hpp"

#include <xbt/log.h>

#include <string>

#include "common/errors.hpp"

namespace paradyse::sim {
namespace sg4 = simgrid::s4u;

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

sg4::Link* duplex_link(sg4::NetZone* zone, const std::string& name, double bytes_per_second,
                       double latency_s) {
  sg4::Link* link = zone->create_split_duplex_link(name, bytes_per_second);
  link->set_latency(latency_s);
  link->set_sharing_policy(sg4::Link::SharingPolicy::SHARED);
  link->seal();
  return link;
}

}  // namespace

Platform::Platform(const hw::ClusterSpec& cluster, double oversubscription) {
  PARADYSE_CHECK(!sg4::Engine::has_instance(), "one SimGrid engine at a time in a process");
  PARADYSE_CHECK(oversubscription >= 1, "fat-tree oversubscription below 1");
  engine_ = std::make_unique<sg4::Engine>("paradyse");
  configure_once();

  const int g = cluster.gpus_per_node;
  const int nodes = cluster.num_nodes;
  const int nics = std::max(1, std::min(cluster.nics_per_node, g));
  sg4::NetZone* zone = sg4::create_full_zone(cluster.name);

  std::vector<sg4::Link*> nvlink, nic, spine;
  for (int r = 0; r < nodes * g; ++r) {
    const std::string id = std::to_string(r);
    gpus_.push_back(zone->create_host("gpu" + id, 1.0)->seal());
    nvlink.push_back(duplex_link(zone, "nvlink" + id, cluster.intra_node.peak_bus_bandwidth(),
                                 cluster.intra_node.hop_latency_s() / 2));
  }
  if (nodes > 1) {
    for (int n = 0; n < nodes * nics; ++n)
      nic.push_back(duplex_link(zone, "nic" + std::to_string(n), cluster.inter_node.bytes_per_second,
                                cluster.inter_node.hop_latency_s() / 2));
    for (int rail = 0; rail < nics; ++rail)
      spine.push_back(duplex_link(zone, "spine" + std::to_string(rail),
                                  nodes * cluster.inter_node.bytes_per_second / oversubscription, 0));
  }

  using Direction = sg4::LinkInRoute::Direction;
  const auto rail = [&](int r) { return r % g % nics; };
  const auto nic_of = [&](int r) { return nic[static_cast<std::size_t>(r / g * nics + rail(r))]; };
  for (int a = 0; a < nodes * g; ++a) {
    for (int b = 0; b < nodes * g; ++b) {
      if (a == b) continue;
      std::vector<sg4::LinkInRoute> route;
      if (a / g == b / g) {
        route = {{nvlink[static_cast<std::size_t>(a)], Direction::UP},
                 {nvlink[static_cast<std::size_t>(b)], Direction::DOWN}};
      } else if (rail(a) == rail(b)) {
        route = {{nic_of(a), Direction::UP}, {nic_of(b), Direction::DOWN}};
      } else {
        route = {{nic_of(a), Direction::UP},
                 {spine[static_cast<std::size_t>(rail(a))], Direction::UP},
                 {spine[static_cast<std::size_t>(rail(b))], Direction::DOWN},
                 {nic_of(b), Direction::DOWN}};
      }
      zone->add_route(gpus_[static_cast<std::size_t>(a)]->get_netpoint(),
                      gpus_[static_cast<std::size_t>(b)]->get_netpoint(), nullptr, nullptr, route, false);
    }
  }
  zone->seal();
}

Platform::~Platform() = default;

}  // namespace paradyse::sim
