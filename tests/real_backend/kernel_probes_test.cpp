// real_backend/kernel_probes.cpp on the tracer: calibrate times every compute call the cost model
// has no curve of its own for, each at sizes that grow, sized as the tracer counts that call.
#include "real_backend/kernel_probes.hpp"

#include <algorithm>
#include <set>
#include <string>

#include "program/tracing_backend.hpp"

#include "tests/real_backend/catch_after_torch.hpp"  // last: after LibTorch

namespace paradyse::testing {
namespace {

TEST_CASE("kernel probes: every call the op table probes by its rate, at growing sizes", "[real]") {
  const ModelSpec model = load_model("tiny-gpt");
  const int degree = 2;
  std::set<std::string> probed;
  for (const real::KernelProbe& probe : real::kernel_probes(model, degree, 512)) {
    INFO(to_string(probe.kernel));
    CHECK(probed.insert(std::string(to_string(probe.kernel))).second);
    double previous = 0;
    int points = 0;
    for (int point = 0;; ++point) {
      const std::optional<double> size = real::traced_size(probe, point, degree);
      if (!size) break;
      ++points;
      CHECK(*size > previous);  // the rate curve's x grows
      previous = *size;
    }
    // Sequence lengths 64, 128, 256, 512; Adam one point per distinct weight shard size of tiny-gpt
    // (norm gamma, proj, qkv, MLP, embedding).
    CHECK(points == (probe.kernel == Kernel::adam_step ? 5 : 4));
  }
  std::set<std::string> expected;
  for (const CallInfo& call : kBackendCalls)
    if (call.probe == CallProbe::rate) expected.insert(std::string(call.name));
  CHECK(probed == expected);
}

TEST_CASE("kernel probes: a length that is no power of two is the last point", "[real]") {
  const std::vector<real::KernelProbe> probes = real::kernel_probes(load_model("tiny-gpt"), 2, 300);
  const real::KernelProbe& add =
      *std::find_if(probes.begin(), probes.end(), [](const auto& p) { return p.kernel == Kernel::add; });
  std::vector<int64_t> lengths;
  for (int point = 0;; ++point) {
    TracingBackend tracer(0, 2);
    const real::KernelCall call = add.prepare(tracer, point);
    if (!call) break;
    call();
    lengths.push_back(static_cast<int64_t>(tracer.program().ops.back().memory_bytes) /
                      (3 * 2 * 256));  // a + b + y, bf16, h
  }
  CHECK(lengths == std::vector<int64_t>{64, 128, 256, 300});
}

}  // namespace
}  // namespace paradyse::testing
