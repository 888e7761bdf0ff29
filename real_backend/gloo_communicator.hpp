// The CPU communicator: c10d's Gloo process group from LibTorch, over TCP between processes of one
// machine or of several.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>

#include "real_backend/communicator.hpp"

namespace paradyse::real {

// Connects rank `rank` of `size` through `store` (every rank must call it); a peer that does not
// answer within `timeout` fails the operation with CommunicationError instead of hanging.
std::unique_ptr<Communicator> make_gloo_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                     int size, std::chrono::milliseconds timeout);

}  // namespace paradyse::real
