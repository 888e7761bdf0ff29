// How the ranks of a real run come to be. `paradyse run --ranks P` on one machine starts P copies of
// itself, each told its rank through the environment; under mpirun, srun or torchrun the job
// launcher has done that already, and each copy reads its rank and world size from the variables
// those set. Either way every rank then meets the others through a store (a file for local
// launches, TCP at MASTER_ADDR:MASTER_PORT otherwise) and connects one communicator.
// Project types only: LibTorch stays in this folder's sources.
#pragma once

#include "real_backend/communication_error.hpp"

#include <chrono>
#include <optional>
#include <string>

namespace paradyse::real {

struct RankEnvironment {
  int rank = 0;
  int size = 1;
  int local_rank = 0;    // among the ranks on this machine: what picks its GPU
  std::string store;     // "file:PATH" or "tcp:HOST:PORT"
  std::string launcher;  // which variables it came from: "paradyse", "mpirun", "srun", "torchrun"
};

// This process's rank, if it is one: PARADYSE_RANK/PARADYSE_WORLD_SIZE (local launch), then
// OMPI_COMM_WORLD_RANK/SIZE (Open MPI's mpirun), PMI_RANK/PMI_SIZE (MPICH, Intel MPI),
// SLURM_PROCID/SLURM_NTASKS (srun), RANK/WORLD_SIZE (torchrun); the local rank from LOCAL_RANK,
// OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID, else the rank itself (one machine,
// as paradyse's own launch is). Malformed values are an InputError.
std::optional<RankEnvironment> rank_from_environment();

// Starts `ranks` copies of this very command line on this machine and waits for them. If a rank
// fails (non-zero exit or a signal), the others get `grace` to notice (their communicator fails as
// soon as a peer's connection drops) and are then killed, so a dead rank never leaves the rest
// hanging. Returns the exit status for the whole run: 0, the failed rank's status when it exited, or
// kLostRankStatus (4) when it was killed by a signal, after writing to stderr which rank failed and how.
int launch_local_ranks(int ranks, std::chrono::seconds grace);

}  // namespace paradyse::real
