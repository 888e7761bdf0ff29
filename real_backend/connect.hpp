// One rank's device and communicator from its RankEnvironment: the store it names, then Gloo on CPU,
// NCCL on a GPU, or Gloo staging a GPU's tensors through the host (several ranks on one GPU).
#pragma once

#include <chrono>
#include <memory>

#include "real_backend/communicator.hpp"
#include "real_backend/launcher.hpp"

namespace paradyse::real {

// Where this rank's tensors live: the CPU; with `cuda`, the GPU of its local rank, refused when the
// machine has fewer GPUs than ranks (gpu_of_local_rank); with `cuda` and `gloo_on_device`, GPU
// local rank modulo the GPUs, so that several ranks may share one.
at::Device rank_device(const RankEnvironment& env, bool cuda, bool gloo_on_device);

// The communicator of a rank whose tensors live on `device` (rank_device's).
std::unique_ptr<Communicator> connect(const RankEnvironment& env, const at::Device& device,
                                      bool gloo_on_device, std::chrono::milliseconds timeout);

}  // namespace paradyse::real
