// The GPU communicator: NCCL on one CUDA device per rank. Built only where CUDA and NCCL are found
// (PARADYSE_WITH_NCCL); elsewhere the real backend runs on CPU with Gloo.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>

#include "real_backend/communicator.hpp"

namespace paradyse::real {

// Connects rank `rank` of `size` on device `cuda_device` (every rank must call it); rank 0 publishes
// the NCCL id through `store`. Ops run on a communication stream ordered after LibTorch's default
// stream, and Work::wait() orders that default stream after the op without blocking the host, as
// torch's NCCL works do. Only barrier() blocks the host, and it fails with CommunicationError after
// `timeout` instead of hanging on a dead peer.
std::unique_ptr<Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                     int size, int cuda_device,
                                                     std::chrono::milliseconds timeout);

}  // namespace paradyse::real
