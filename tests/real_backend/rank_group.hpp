// P ranks of a real backend in one test process: one thread per rank, each with its own Gloo
// communicator over loopback, meeting through an in-process store. What each rank returns is
// collected for the test's assertions, which run on the calling thread.
//
// The ranks run on the device of their options. On a GPU (PARADYSE_TEST_DEVICE=cuda, test_device())
// they share GPU 0: one rank talks through NCCL, several through Gloo staging the GPU's tensors
// through the host, as NCCL refuses two ranks on one GPU.
#pragma once

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "real_backend/compute_threads.hpp"
#include "real_backend/gloo_communicator.hpp"
#include "real_backend/staged_communicator.hpp"
#ifdef PARADYSE_WITH_NCCL
#include "real_backend/nccl_communicator.hpp"
#endif
#include "real_backend/torch_backend.hpp"

namespace paradyse::testing {

// The device the real backend's tests run on: cuda:0 when PARADYSE_TEST_DEVICE=cuda, else the CPU.
inline at::Device test_device() {
  const char* device = std::getenv("PARADYSE_TEST_DEVICE");
  return device != nullptr && std::string(device) == "cuda" ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
}

inline std::unique_ptr<real::Communicator> rank_communicator(const c10::intrusive_ptr<c10d::Store>& store,
                                                             int rank, int degree, const at::Device& device) {
  const std::chrono::seconds timeout(60);
#ifdef PARADYSE_WITH_NCCL
  if (device.is_cuda() && degree == 1) return real::make_nccl_communicator(store, rank, degree, 0, timeout);
#endif
  auto gloo = real::make_gloo_communicator(store, rank, degree, timeout);
  return device.is_cuda() ? real::make_staged_communicator(std::move(gloo), device) : std::move(gloo);
}

template <class Result>
std::vector<Result> run_ranks(int degree, const ModelSpec& model,
                              const std::function<Result(real::TorchBackend&)>& body,
                              real::TorchBackendOptions options = {}) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<Result> results(static_cast<std::size_t>(degree));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(degree));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < degree; ++rank)
    threads.emplace_back([&, rank] {
      try {
        real::set_compute_threads(1);  // the ranks share the machine's cores
        auto communicator = rank_communicator(store, rank, degree, options.device);
        real::TorchBackend backend(*communicator, model, options);
        results[static_cast<std::size_t>(rank)] = body(backend);
        communicator->barrier();  // no rank tears its connections down while another still uses them
      } catch (...) {
        errors[static_cast<std::size_t>(rank)] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  return results;
}

}  // namespace paradyse::testing
