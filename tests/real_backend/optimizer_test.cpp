// The real backend's optimizer step against Adam written out here in double precision: LibTorch's fused
// kernel where the LibTorch has one, its ops one by one otherwise, must give Adam's updates.
#include <ATen/ATen.h>

#include <cmath>

#include "tests/real_backend/rank_group.hpp"
#include "tests/real_backend/real_helpers.hpp"

#include "tests/real_backend/catch_after_torch.hpp"  // last: after LibTorch

namespace paradyse::testing {
namespace {

TEST_CASE("adam_step: three steps are Adam's updates (β 0.9, 0.999, ε 1e-8, no weight decay)", "[real]") {
  constexpr int64_t kSize = 64;
  constexpr int kSteps = 3;
  real::TorchBackendOptions options;  // float32 storage: the update itself, not a bf16 rounding of it
  options.device = test_device();
  options.learning_rate = 1e-2;
  const std::vector<at::Tensor> grads = {at::linspace(-1, 1, kSize, at::kDouble),
                                         at::linspace(2, -0.5, kSize, at::kDouble),
                                         at::linspace(-1e-3, 3e-3, kSize, at::kDouble)};
  const auto results = run_ranks<std::vector<at::Tensor>>(
      1, tiny_model(false, true),
      [&](real::TorchBackend& be) {
        Tensor weight = be.parameter("optimizer_test.w", {kSize}, 0);
        const at::Tensor initial = real::TorchBackend::unwrap(weight).to(at::kCPU).clone();
        Tensor grad = be.gradient_buffer({kSize});
        for (const at::Tensor& g : grads) {
          real::TorchBackend::unwrap(grad).copy_(g.to(at::kFloat));
          be.adam_step(weight, grad);
        }
        return std::vector<at::Tensor>{initial, real::TorchBackend::unwrap(weight).to(at::kCPU).clone()};
      },
      options);
  at::Tensor w = results[0][0].to(at::kDouble), m = at::zeros({kSize}, at::kDouble), v = m.clone();
  for (int t = 1; t <= kSteps; ++t) {
    const at::Tensor& g = grads[static_cast<std::size_t>(t - 1)];
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    const at::Tensor m_hat = m / (1 - std::pow(0.9, t)), v_hat = v / (1 - std::pow(0.999, t));
    w = w - 1e-2 * m_hat / (at::sqrt(v_hat) + 1e-8);
  }
  const at::Tensor moved = results[0][1].to(at::kDouble) - results[0][0].to(at::kDouble);
  const at::Tensor expected = w - results[0][0].to(at::kDouble);
  CHECK(at::max(at::abs(moved)).item<double>() > 1e-2);  // the weights moved by about lr a step
  CHECK(at::max(at::abs(moved - expected)).item<double>() < 1e-6);
}

}  // namespace
}  // namespace paradyse::testing
