// P ranks of a real backend in one test process: one thread per rank, each with its own Gloo
// communicator over loopback, meeting through an in-process store. What each rank returns is
// collected for the test's assertions, which run on the calling thread.
#pragma once

#include <ATen/Parallel.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "real_backend/gloo_communicator.hpp"
#include "real_backend/torch_backend.hpp"

namespace paradyse::testing {

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
        at::set_num_threads(1);  // per thread (OpenMP's setting is): the ranks share the machine's cores
        auto communicator = real::make_gloo_communicator(store, rank, degree, std::chrono::seconds(60));
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
