// costmodel/routed_collectives.cpp: a collective priced on the links its flows cross, with its sibling
// groups' flows beside it, against closed forms on small fat trees.
#include "costmodel/routed_collectives.hpp"

#include <catch2/catch.hpp>

#include "common/units.hpp"
#include "costmodel/collective_flows.hpp"
#include "costmodel/op_time.hpp"
#include "tests/hw_models/network_files.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;

namespace {

Op collective(OpKind kind, int first, int size, int stride, double size_bytes) {
  Op op;
  op.kind = kind;
  op.stream = Stream::communication;
  op.size_bytes = size_bytes;
  const double ring = static_cast<double>(size - 1) / size;
  op.bus_bytes = kind == OpKind::send_recv ? size_bytes : ring * size_bytes;
  op.group_first = static_cast<int16_t>(first);
  op.group_size = static_cast<int16_t>(size);
  op.group_stride = static_cast<int16_t>(stride);
  op.send_to = static_cast<int16_t>(1 % size);
  op.recv_from = static_cast<int16_t>((size - 1) % size);
  return op;
}

// Two DGX A100 nodes, each with its eight NICs under one leaf switch, the leaves joined by a spine
// whose uplinks carry a node's NICs over `oversubscription`.
hw::ClusterSpec top_of_rack(testing::TempDir& dir, double oversubscription) {
  return hw::load_cluster(dir.write("tor.json", testing::a100_with_network(testing::top_of_rack_tree(
                                                    hw::load_cluster("dgx-a100"), 2, oversubscription))));
}

}  // namespace

TEST_CASE("routed collectives: 2:1 oversubscription halves a cross-spine all-to-all's bandwidth",
          "[costmodel]") {
  testing::TempDir dir;
  const double S = 256 * kMiB;
  const Op op = collective(OpKind::all_to_all, 0, 16, 1, S);
  auto streaming_s = [&](double oversubscription) {
    const hw::ClusterSpec cluster = top_of_rack(dir, oversubscription);
    // Its longest route: an NVLink hop (two links of half a hop); across the spine two NIC links of
    // half an inter-node hop, the spine's none.
    const double latency_s = std::max(cluster.intra_node.hop_latency_s(), cluster.inter_node.hop_latency_s());
    return *costmodel::RoutedCollectiveTimer(cluster).seconds(op, 16, 16) - latency_s;
  };
  // 1:1: each NIC sends half of its GPU's S (to the eight GPUs of the other node), at the rate the
  // collective's size allows; the uplink carries eight NICs' worth at eight NICs' bandwidth.
  const hw::ClusterSpec cluster = top_of_rack(dir, 1);
  const double rate =
      cluster.inter_node.bytes_per_second * costmodel::flow_efficiency(op, 16, cluster.inter_node, cluster);
  CHECK(streaming_s(1) == Approx(S / 2 / rate).epsilon(1e-9));
  CHECK(streaming_s(2) == Approx(2 * streaming_s(1)).epsilon(1e-9));
}

TEST_CASE("routed collectives: sibling groups share the links their flows cross", "[costmodel]") {
  // A ring of two members eight ranks apart (GPU i of each node) runs at once in each of the eight
  // such groups of a 16-rank job: sixteen transfers up a spine of four NICs' worth at 2:1, half the
  // rate one group's two transfers get from their NICs.
  testing::TempDir dir;
  const hw::ClusterSpec cluster = top_of_rack(dir, 2);
  const costmodel::RoutedCollectiveTimer timer(cluster);
  const double latency_s = cluster.inter_node.hop_latency_s();
  const Op shift = collective(OpKind::send_recv, 0, 2, 8, 64 * kMiB);
  const double alone_s = *timer.seconds(shift, 2, 2) - latency_s;  // the job is this group alone
  const double rate =
      cluster.inter_node.bytes_per_second * costmodel::flow_efficiency(shift, 2, cluster.inter_node, cluster);
  CHECK(alone_s == Approx(64 * kMiB / rate).epsilon(1e-9));
  CHECK(*timer.seconds(shift, 2, 16) - latency_s == Approx(2 * alone_s).epsilon(1e-9));
  // Another of the eight, routed after the first or before any: the same time.
  const Op fourth = collective(OpKind::send_recv, 3, 2, 8, 64 * kMiB);
  const costmodel::RoutedCollectiveTimer fresh(cluster);
  CHECK(*fresh.seconds(fourth, 2, 16) - latency_s == Approx(2 * alone_s).epsilon(1e-9));
  CHECK(*timer.seconds(fourth, 2, 16) == *fresh.seconds(fourth, 2, 16));
  // Consecutive groups of eight stay inside their nodes: their siblings load other links.
  const Op inside = collective(OpKind::all_gather, 8, 8, 1, 64 * kMiB);
  CHECK(*timer.seconds(inside, 8, 16) == Approx(*timer.seconds(inside, 8, 8)).epsilon(1e-12));
}

TEST_CASE("routed collectives: inside a node, the measured bus bandwidth of the built-in tree",
          "[costmodel]") {
  // Each GPU's NVLink link carries its bus bytes at the peak: the time the fabric's formula gives.
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 2);
  const costmodel::RoutedCollectiveTimer timer(cluster);
  for (const OpKind kind : {OpKind::all_gather, OpKind::reduce_scatter, OpKind::all_to_all}) {
    CAPTURE(to_string(kind));
    const Op op = collective(kind, 0, 8, 1, 32 * kMiB);
    const hw::FabricSpec& nvlink = cluster.intra_node;
    double bandwidth = nvlink.streaming_bandwidth(op.size_bytes, costmodel::measured_as(kind));
    if (kind == OpKind::all_to_all) bandwidth *= nvlink.all_to_all_efficiency;
    CHECK(*timer.seconds(op, 8, 16) ==
          Approx(costmodel::latency_hops(kind, 8) * nvlink.hop_latency_s() + op.bus_bytes / bandwidth)
              .epsilon(1e-9));
  }
}

TEST_CASE("routed collectives: an all-to-all over a thousand ranks is left to the formula", "[costmodel]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 128);
  const Op op = collective(OpKind::all_to_all, 0, 1024, 1, kMiB);
  CHECK_FALSE(costmodel::RoutedCollectiveTimer(cluster).seconds(op, 1024, 1024));
  CHECK(costmodel::OpTimer(cluster, 1024).seconds(op) > 0);
  // A ring over the same ranks is about two thousand flows: routed.
  CHECK(costmodel::RoutedCollectiveTimer(cluster).seconds(collective(OpKind::all_gather, 0, 1024, 1, kMiB),
                                                          1024, 1024));
}
