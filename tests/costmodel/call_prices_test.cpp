// The op table against the cost model: every backend call it declares has a price on every cluster
// preset, and every measured rate a preset gives a call is a function of what the table says sizes
// that call. A call added to the table without a price fails here.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "costmodel/op_time.hpp"
#include "hw_models/cluster.hpp"
#include "program/op_table.hpp"

using namespace paradyse;

namespace {

// An op of `kernel` with work of every sort, so that whichever figure prices it has something to price.
Op op_of_call(Kernel kernel, OpKind kind) {
  Op op;
  op.kind = kind;
  op.kernel = kernel;
  op.flops = 1e10;
  op.memory_bytes = 1e8;
  op.dims = {16, 2048, 2048, 128};
  return op;
}

}  // namespace

TEST_CASE("op table: every compute call has a time and a host cost on every cluster preset", "[costmodel]") {
  for (const std::string& preset : hw::cluster_preset_names()) {
    const hw::ClusterSpec cluster = hw::load_cluster(preset);
    const costmodel::OpTimer timer(cluster, cluster.gpus_per_node);
    for (const CallInfo& call : kBackendCalls) {
      const Kernel kernel = *kernel_named(call.name);
      if (!is_compute_call(kernel)) continue;
      INFO(preset << ": " << call.name);
      REQUIRE(call.op_kind.has_value());
      const Op op = op_of_call(kernel, *call.op_kind);
      const double seconds = timer.seconds(op);
      CHECK(std::isfinite(seconds));
      CHECK(seconds > 0);
      CHECK(std::isfinite(timer.dispatch_s(op)));
      CHECK(timer.dispatch_s(op) > 0);
    }
  }
}

TEST_CASE("op table: every collective has a network time on every cluster preset", "[costmodel]") {
  for (const std::string& preset : hw::cluster_preset_names()) {
    const hw::ClusterSpec cluster = hw::load_cluster(preset);
    const costmodel::OpTimer timer(cluster, cluster.gpus_per_node);
    for (std::size_t k = 0; k < kOpKindCount; ++k) {
      const auto kind = static_cast<OpKind>(k);
      if (!is_communication(kind)) continue;
      INFO(preset << ": " << to_string(kind));
      Op op = op_of_call(Kernel::communication, kind);
      op.stream = Stream::communication;
      op.size_bytes = op.bus_bytes = 1e8;
      op.group_size = static_cast<int16_t>(cluster.gpus_per_node);
      if (kind == OpKind::send_recv) op.send_to = op.recv_from = 1;
      if (kind == OpKind::broadcast || kind == OpKind::reduce) op.root = 0;
      const double seconds = timer.seconds(op);
      CHECK(std::isfinite(seconds));
      CHECK(seconds > 0);
    }
  }
}

TEST_CASE("op table: a preset's measured rate of a call is sized as the table sizes that call",
          "[costmodel]") {
  int rates = 0;
  for (const std::string& preset : hw::cluster_preset_names()) {
    const hw::ClusterSpec cluster = hw::load_cluster(preset);
    for (const auto& [name, rate] : cluster.gpu.kernel_rates) {
      INFO(preset << ": gpu.kernels." << name);
      const std::optional<Kernel> kernel = kernel_named(name);
      REQUIRE(kernel.has_value());
      CHECK(is_compute_call(*kernel));
      CHECK(rate.by_flops == (call_info(*kernel).size == CallSize::flops));
      ++rates;
    }
  }
  CHECK(rates > 0);  // the measured presets give some
}
