// One rank's communicator from its RankEnvironment: the store it names, then Gloo on CPU or NCCL on a
// GPU (the one given by the node-local rank).
#pragma once

#include <chrono>
#include <memory>

#include "real_backend/communicator.hpp"
#include "real_backend/launcher.hpp"

namespace paradyse::real {

std::unique_ptr<Communicator> connect(const RankEnvironment& env, bool cuda,
                                      std::chrono::milliseconds timeout);

// The GPU of this rank: LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK or SLURM_LOCALID when set, else the
// rank modulo the devices visible.
int local_cuda_device(const RankEnvironment& env);

}  // namespace paradyse::real
