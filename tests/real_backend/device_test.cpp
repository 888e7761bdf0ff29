// The real backend's device helpers as far as a CPU shows them: which GPU a rank may take, the
// environment's local rank, reads back to the host, seeded generators and the clock's stamps.
#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/errors.hpp"
#include "real_backend/connect.hpp"
#include "real_backend/device.hpp"
#include "real_backend/launcher.hpp"
#include "real_backend/real_run.hpp"

#include "tests/real_backend/catch_after_torch.hpp"  // last: after LibTorch

namespace paradyse::testing {
namespace {

// Sets environment variables for one scope, as a launcher would, and removes them after.
class ScopedEnvironment {
 public:
  ScopedEnvironment(std::initializer_list<std::pair<const char*, const char*>> variables) {
    for (const auto& [name, value] : variables) {
      setenv(name, value, 1);
      names_.push_back(name);
    }
  }
  ~ScopedEnvironment() {
    for (const char* name : names_) unsetenv(name);
  }

 private:
  std::vector<const char*> names_;
};

}  // namespace

TEST_CASE("a rank takes the GPU of its local rank, and a machine runs no more ranks than it has GPUs",
          "[real]") {
  CHECK(real::gpu_of_local_rank(0, 1) == 0);
  CHECK(real::gpu_of_local_rank(7, 8) == 7);
  try {
    real::gpu_of_local_rank(2, 2);
    FAIL("a third rank on two GPUs was accepted");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("local rank 2 needs GPU 2, but this machine shows 2 GPUs") &&
                             Catch::Contains("run at most 2 ranks a machine") &&
                             Catch::Contains("--gloo-on-device"));
  }
  CHECK_THROWS_AS(real::gpu_of_local_rank(-1, 4), InputError);
}

TEST_CASE("the local rank comes from the launcher's variables, else it is the rank", "[real]") {
  {
    const ScopedEnvironment env{{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}};
    const auto rank = real::rank_from_environment();
    REQUIRE(rank);
    CHECK(rank->rank == 5);
    CHECK(rank->local_rank == 1);
  }
  {
    const ScopedEnvironment env{
        {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}};
    CHECK(real::rank_from_environment()->local_rank == 3);
  }
  {
    const ScopedEnvironment env{{"PARADYSE_RANK", "2"}, {"PARADYSE_WORLD_SIZE", "3"}};
    CHECK(real::rank_from_environment()->local_rank == 2);  // paradyse's own launch: one machine
  }
  {
    const ScopedEnvironment env{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "x"}};
    CHECK_THROWS_WITH(real::rank_from_environment(), Catch::Contains("LOCAL_RANK") && Catch::Contains("'x'"));
  }
}

TEST_CASE("a CPU rank's device is the CPU, and CUDA without a GPU is refused before any rank starts",
          "[real]") {
  real::RankEnvironment env;
  CHECK(real::rank_device(env, /*cuda=*/false, /*gloo_on_device=*/false) == at::Device(at::kCPU));
  CHECK_FALSE(real::device_unavailable(false, 4, false));
  if (real::visible_gpus() == 0) {
    const auto reason = real::device_unavailable(true, 1, false);
    REQUIRE(reason);
    CHECK_THAT(*reason, Catch::Contains("CPU-only LibTorch") || Catch::Contains("cannot use it here"));
    CHECK_THROWS_AS(real::rank_device(env, true, false), InputError);
  } else {
    const auto reason = real::device_unavailable(true, real::visible_gpus() + 1, false);
    REQUIRE(reason);
    CHECK_THAT(*reason, Catch::Contains("NCCL runs one rank per GPU"));
    CHECK_FALSE(real::device_unavailable(true, real::visible_gpus() + 1, /*gloo_on_device=*/true));
  }
}

TEST_CASE("on_host returns the values, contiguous, on the CPU", "[real]") {
  const at::Tensor t = at::arange(12, at::kDouble).view({3, 4}).t();  // strided
  const at::Tensor host = real::on_host(t);
  CHECK(host.device().is_cpu());
  CHECK(host.is_contiguous());
  CHECK(at::equal(host, t));
}

TEST_CASE("a device generator with one seed draws the same numbers, with another it does not", "[real]") {
  const at::Device cpu(at::kCPU);
  auto draw = [&](uint64_t seed) {
    at::Generator generator = real::make_generator(cpu, seed);
    return at::bernoulli(at::full({1000}, 0.5), generator);
  };
  CHECK(at::equal(draw(3), draw(3)));
  CHECK_FALSE(at::equal(draw(3), draw(4)));
}

TEST_CASE("the device clock's stamps follow the work before them, from its last restart", "[real]") {
  real::DeviceClock clock(at::kCPU);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto first = clock.stamp();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const auto second = clock.stamp();
  CHECK(clock.seconds(first) >= 0.020);
  CHECK(clock.seconds(second) - clock.seconds(first) >= 0.030);
  clock.restart();
  const auto after_restart = clock.stamp();
  CHECK(clock.seconds(after_restart) < 0.020);
  CHECK_THROWS(clock.seconds(second));  // forgotten with the restart
}

}  // namespace paradyse::testing
