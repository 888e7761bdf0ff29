#include "hw_models/network.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/graph/visitors.hpp>

#include <algorithm>
#include <limits>
#include <set>

#include "common/errors.hpp"

namespace paradyse::hw {
namespace {

using DirectedGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

// Only switches forward: a search outward from a GPU leaves no GPU but the one it started from.
struct Forwards {
  const DirectedGraph* graph = nullptr;
  int gpus = 0, origin = 0;
  bool operator()(DirectedGraph::edge_descriptor e) const {
    const auto from = static_cast<int>(boost::source(e, *graph));
    return from >= gpus || from == origin;
  }
};

// A mix of the pair, so that equal routes spread over the pairs (ECMP's flow hash).
uint64_t pair_hash(int from, int to) {
  uint64_t x =
      static_cast<uint64_t>(from) * 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(to) * 0xC2B2AE3D27D4EB4FULL;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  return x ^ (x >> 29);
}

}  // namespace

struct Network::Graph : DirectedGraph {
  using DirectedGraph::DirectedGraph;
};

Network::~Network() = default;

Network::Network(int nodes, int gpus, std::vector<std::string> switches, std::vector<NetworkLink> links,
                 const std::string& source)
    : nodes_(nodes), gpus_(gpus), switches_(std::move(switches)), links_(std::move(links)) {
  PARADYSE_CHECK(gpus >= 1, "a network of no GPU");
  adjacent_.resize(static_cast<std::size_t>(num_vertices()));
  for (std::size_t i = 0; i < links_.size(); ++i) {
    const NetworkLink& link = links_[i];
    const std::string element = "network.links[" + std::to_string(i) + "]";
    for (int end : {link.a, link.b})
      PARADYSE_CHECK(end >= 0 && end < num_vertices(), element + " names no vertex");
    if (link.a == link.b)
      throw InputError(source, 0, element + ".between",
                       "expected two different ends, got " + vertex_name(link.a) + " twice");
    if (!(link.bytes_per_second > 0))
      throw InputError(source, 0, element + ".bytes_per_second",
                       "expected a bandwidth above 0, got " + std::to_string(link.bytes_per_second));
    if (!(link.latency_s >= 0))
      throw InputError(source, 0, element + ".latency_seconds",
                       "expected a latency of at least 0, got " + std::to_string(link.latency_s));
    adjacent_[static_cast<std::size_t>(link.a)].emplace_back(link.b, static_cast<int>(i));
    adjacent_[static_cast<std::size_t>(link.b)].emplace_back(link.a, static_cast<int>(i));
  }
  auto graph = std::make_unique<Graph>(static_cast<std::size_t>(num_vertices()));
  for (const NetworkLink& link : links_) {
    boost::add_edge(static_cast<std::size_t>(link.a), static_cast<std::size_t>(link.b), *graph);
    boost::add_edge(static_cast<std::size_t>(link.b), static_cast<std::size_t>(link.a), *graph);
  }
  graph_ = std::move(graph);
  // Every GPU reaches GPU 0 (and so every other: links carry both directions).
  if (const std::string missing = unreachable(toward(0).distance); !missing.empty())
    throw InputError(source, 0, "network",
                     "expected a route between every two GPUs through switches, got " + missing +
                         " with no route to gpu0");
}

std::string Network::vertex_name(int vertex) const {
  return vertex < gpus_ ? "gpu" + std::to_string(vertex)
                        : switches_[static_cast<std::size_t>(vertex - gpus_)];
}

std::string Network::unreachable(const std::vector<int>& distances) const {
  for (int gpu = 0; gpu < gpus_; ++gpu)
    if (distances[static_cast<std::size_t>(gpu)] < 0) return vertex_name(gpu);
  return "";
}

const Network::Toward& Network::toward(int to) const {
  const std::lock_guard<std::mutex> lock(cache_mutex_);
  std::unique_ptr<Toward>& cached = toward_[to];
  if (cached) return *cached;
  auto result = std::make_unique<Toward>();
  // Hops out from `to` over the links GPUs do not forward on are the hops into it (links carry both
  // directions alike).
  const DirectedGraph& graph = *graph_;
  const boost::filtered_graph<DirectedGraph, Forwards> switched(graph, Forwards{&graph, gpus_, to});
  std::vector<int>& distance = result->distance;
  distance.assign(static_cast<std::size_t>(num_vertices()), -1);
  distance[static_cast<std::size_t>(to)] = 0;
  boost::breadth_first_search(switched, static_cast<std::size_t>(to),
                              boost::visitor(boost::make_bfs_visitor(
                                  boost::record_distances(distance.data(), boost::on_tree_edge()))));
  std::vector<int> order;  // the vertices reached, nearest first
  for (int v = 0; v < num_vertices(); ++v)
    if (distance[static_cast<std::size_t>(v)] >= 0) order.push_back(v);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return distance[static_cast<std::size_t>(a)] < distance[static_cast<std::size_t>(b)];
  });
  // Each vertex's widest shortest route: its best next hop's link and onward width, whichever is lower.
  std::vector<double>& width = result->width;
  width.assign(static_cast<std::size_t>(num_vertices()), 0);
  width[static_cast<std::size_t>(to)] = std::numeric_limits<double>::infinity();
  for (const int at : order)
    for (const auto& [neighbour, link] : adjacent_[static_cast<std::size_t>(at)])
      if (nearer(*result, at, neighbour, to))
        width[static_cast<std::size_t>(at)] =
            std::max(width[static_cast<std::size_t>(at)], onward(*result, neighbour, link));
  cached = std::move(result);
  return *cached;
}

bool Network::nearer(const Toward& toward, int at, int neighbour, int to) const {
  const int d = toward.distance[static_cast<std::size_t>(neighbour)];
  return (neighbour >= gpus_ || neighbour == to) && d >= 0 &&
         d == toward.distance[static_cast<std::size_t>(at)] - 1;
}

double Network::onward(const Toward& toward, int neighbour, int link) const {
  return std::min(links_[static_cast<std::size_t>(link)].bytes_per_second,
                  toward.width[static_cast<std::size_t>(neighbour)]);
}

std::vector<RouteHop> Network::route(int from, int to) const {
  PARADYSE_CHECK(from >= 0 && from < gpus_ && to >= 0 && to < gpus_, "a route between GPUs of the network");
  std::vector<RouteHop> hops;
  if (from == to) return hops;
  const Toward& toward = this->toward(to);
  const uint64_t hash = pair_hash(from, to);
  std::vector<std::pair<int, int>> next;  // (vertex, link) one hop nearer, as wide onward
  for (int at = from; at != to;) {
    next.clear();
    for (const auto& [neighbour, link] : adjacent_[static_cast<std::size_t>(at)])
      if (nearer(toward, at, neighbour, to) &&
          onward(toward, neighbour, link) == toward.width[static_cast<std::size_t>(at)])
        next.emplace_back(neighbour, link);
    PARADYSE_CHECK(!next.empty(), "no route from " + vertex_name(from) + " to " + vertex_name(to));
    const auto [vertex, link] = next[hash % next.size()];
    hops.push_back({link, links_[static_cast<std::size_t>(link)].a == at});
    at = vertex;
  }
  return hops;
}

std::shared_ptr<const Network> read_network(const json_input::Object& block, int gpus_per_node) {
  block.require_keys({"nodes", "switches", "links", "source"});
  const int64_t nodes = block.positive_integer("nodes");
  if (nodes * gpus_per_node > 1 << 20)
    block.fail("nodes", "expected at most " + std::to_string((1 << 20) / gpus_per_node) + " nodes, got " +
                            std::to_string(nodes));
  const int gpus = static_cast<int>(nodes) * gpus_per_node;

  const json_input::Json& names = block.json().at("switches");
  if (!names.is_array()) block.fail("switches", "expected an array of switch names");
  std::unordered_map<std::string, int> vertex;
  for (int gpu = 0; gpu < gpus; ++gpu) vertex["gpu" + std::to_string(gpu)] = gpu;
  std::vector<std::string> switches;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string field = "switches[" + std::to_string(i) + "]";
    if (!names[i].is_string() || names[i].get<std::string>().empty())
      block.fail(field, "expected a switch's name");
    const std::string name = names[i].get<std::string>();
    if (!vertex.emplace(name, gpus + static_cast<int>(switches.size())).second)
      block.fail(field, "expected a name no GPU or other switch has, got \"" + name + "\"");
    switches.push_back(name);
  }

  const json_input::Json& list = block.json().at("links");
  if (!list.is_array()) block.fail("links", "expected an array of links");
  std::vector<NetworkLink> links;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json_input::Object link(list[i], block.source(), block.field("links[" + std::to_string(i) + "]"));
    link.require_keys({"between", "bytes_per_second", "latency_seconds"});
    const json_input::Json& ends = list[i].at("between");
    if (!ends.is_array() || ends.size() != 2) link.fail("between", "expected the names of its two ends");
    NetworkLink& out = links.emplace_back();
    for (std::size_t e = 0; e < 2; ++e) {
      const std::string field = "between[" + std::to_string(e) + "]";
      if (!ends[e].is_string()) link.fail(field, "expected a name");
      const auto found = vertex.find(ends[e].get<std::string>());
      if (found == vertex.end())
        link.fail(field, "expected a GPU (gpu0 to gpu" + std::to_string(gpus - 1) +
                             ") or a switch named in network.switches, got \"" + ends[e].get<std::string>() +
                             "\"");
      (e == 0 ? out.a : out.b) = found->second;
    }
    out.bytes_per_second = link.number_in("bytes_per_second", 1e6, 1e14, "bytes/s");
    out.latency_s = link.number_in("latency_seconds", 0, 1, "s");
  }
  return std::make_shared<const Network>(static_cast<int>(nodes), gpus, std::move(switches), std::move(links),
                                         block.source());
}

}  // namespace paradyse::hw
