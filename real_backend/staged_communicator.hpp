// A host communicator (Gloo) that takes tensors on a device: each call copies its device inputs to
// pinned host buffers, runs the host collective on them and, when waited for, copies the results
// into the device outputs on the current stream. NCCL refuses two ranks on one GPU; this lets several
// ranks share one, so that the strategies' numerics can be checked on CUDA tensors on a one-GPU
// machine. It is for numerics, not for speed: every byte crosses PCIe twice and the host copy of the
// inputs waits for the stream that wrote them.
#pragma once

#include <memory>

#include "real_backend/communicator.hpp"

namespace paradyse::real {

// `host` takes CPU tensors; the result takes tensors on `device` (on the CPU, it stages through
// ordinary host copies, which is how the tests exercise it without a GPU).
std::unique_ptr<Communicator> make_staged_communicator(std::unique_ptr<Communicator> host,
                                                       const at::Device& device);

}  // namespace paradyse::real
