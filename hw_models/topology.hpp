// What carries a cluster's traffic between its GPUs: its links, each split duplex with a bandwidth
// and a latency per direction, and the route between any two GPUs. Either a graph a cluster file
// describes (network.hpp) or the built-in rail-optimised fat tree (rail_fat_tree.hpp). The simulator
// builds its SimGrid platform from it and the analytic model routes collectives on it, so the two
// see the same links.
#pragma once

#include <vector>

namespace paradyse::hw {

struct NetworkLink {
  int a = 0, b = 0;             // vertices: GPUs are 0 … gpus−1, switches follow
  double bytes_per_second = 0;  // per direction
  double latency_s = 0;
};

// One link of a route, in the direction the route crosses it.
struct RouteHop {
  int link = 0;
  bool forward = true;  // from the link's a to its b
  bool operator==(const RouteHop&) const = default;
};

class Topology {
 public:
  virtual ~Topology() = default;
  virtual int num_gpus() const = 0;
  virtual const std::vector<NetworkLink>& links() const = 0;
  // The links from GPU `from` to GPU `to` (empty when they are the same GPU).
  virtual std::vector<RouteHop> route(int from, int to) const = 0;
};

}  // namespace paradyse::hw
