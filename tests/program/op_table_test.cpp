// The op table: every call has one name that finds it again, and the tracer records each call as the
// op the table declares.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "program/op_table.hpp"
#include "program/tracing_backend.hpp"

using namespace paradyse;

TEST_CASE("op table: every backend call has a name of its own that finds it", "[program]") {
  std::set<std::string_view> names;
  for (std::size_t k = 0; k < kKernelCount; ++k) {
    const auto kernel = static_cast<Kernel>(k);
    INFO(k);
    CHECK(!to_string(kernel).empty());
    CHECK(names.insert(to_string(kernel)).second);
    CHECK(kernel_named(to_string(kernel)) == kernel);
  }
  CHECK(!kernel_named("no_such_call").has_value());
  CHECK(!kernel_named("").has_value());
}

TEST_CASE(
    "op table: only collectives leave their op kind to the call, and only they, waits and host copies are no "
    "compute",
    "[program]") {
  for (const CallInfo& call : kBackendCalls) {
    INFO(call.name);
    const Kernel kernel = *kernel_named(call.name);
    CHECK(call.op_kind.has_value() == (call.probe != CallProbe::collective));
    if (call.op_kind) CHECK(is_communication(*call.op_kind) == false);
    CHECK((call.probe == CallProbe::host_link) == (call.op_kind == OpKind::host_copy));
    CHECK(is_compute_call(kernel) == (kernel != Kernel::communication && kernel != Kernel::wait &&
                                      kernel != Kernel::offload && kernel != Kernel::reload));
  }
}

TEST_CASE("op table: the tracer records a call as the op the table declares", "[program]") {
  TracingBackend be(0, 2);
  const Tensor x = be.zeros({1, 64, 32}, DType::bf16);
  const Tensor w = be.parameter("w", {48, 32}, 0);
  const Tensor y = be.linear(x, w);
  be.add(y, y);
  Tensor gathered = be.all_gather(y, 1);
  for (const Op& op : be.program().ops) {
    const CallInfo& call = call_info(op.kernel);
    INFO(call.name);
    if (call.op_kind)
      CHECK(op.kind == *call.op_kind);
    else
      CHECK(is_communication(op.kind));
    CHECK((op.stream == Stream::communication) == is_communication(op.kind));
  }
  CHECK(be.program().ops.size() == 5);  // zeros, linear, add, all_gather, wait
}
