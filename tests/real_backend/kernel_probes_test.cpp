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

TEST_CASE("kernel probes: every call outside GEMMs and fused attention, at growing sizes", "[real]") {
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
  for (std::size_t k = 0; k < kKernelCount; ++k)
    expected.insert(std::string(to_string(static_cast<Kernel>(k))));
  for (Kernel priced_by_own_curve :
       {Kernel::linear, Kernel::matmul, Kernel::weight_grad, Kernel::attention_forward,
        Kernel::attention_backward, Kernel::communication, Kernel::wait})
    expected.erase(std::string(to_string(priced_by_own_curve)));
  expected.erase("read_scalar");  // one number copied to the host: its dispatch is all it costs
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
