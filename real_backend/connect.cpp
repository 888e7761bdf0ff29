#include "real_backend/connect.hpp"

#include <ATen/Context.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>

#include "common/errors.hpp"
#include "real_backend/gloo_communicator.hpp"
#ifdef PARADYSE_WITH_NCCL
#include "real_backend/nccl_communicator.hpp"
#endif

namespace paradyse::real {
namespace {

c10::intrusive_ptr<c10d::Store> open_store(const RankEnvironment& env, std::chrono::milliseconds timeout) {
  if (env.store.rfind("file:", 0) == 0)
    return c10::make_intrusive<c10d::FileStore>(env.store.substr(5), env.size);
  if (env.store.rfind("tcp:", 0) == 0) {
    const std::string address = env.store.substr(4);
    const std::size_t colon = address.rfind(':');
    c10d::TCPStoreOptions options;
    const int port = colon == std::string::npos ? -1 : std::atoi(address.c_str() + colon + 1);
    if (port <= 0 || port > 65535)
      throw InputError("", 0, "MASTER_PORT", "expected a TCP port in 1..65535, got '" + address + "'");
    options.port = static_cast<std::uint16_t>(port);
    options.isServer = env.rank == 0;
    options.numWorkers = static_cast<std::size_t>(env.size);
    options.timeout = timeout;
    return c10::make_intrusive<c10d::TCPStore>(address.substr(0, colon), options);
  }
  throw InputError("", 0, "PARADYSE_STORE", "expected file:PATH or tcp:HOST:PORT, got '" + env.store + "'");
}

}  // namespace

int local_cuda_device(const RankEnvironment& env) {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  const int64_t devices = std::max<int64_t>(1, static_cast<int64_t>(at::getNumGPUs()));
  return static_cast<int>(env.rank % devices);
}

std::unique_ptr<Communicator> connect(const RankEnvironment& env, bool cuda,
                                      std::chrono::milliseconds timeout) {
  auto store = open_store(env, timeout);
  if (!cuda) return make_gloo_communicator(store, env.rank, env.size, timeout);
#ifdef PARADYSE_WITH_NCCL
  return make_nccl_communicator(store, env.rank, env.size, local_cuda_device(env), timeout);
#else
  throw InputError(
      "", 0, "device",
      "expected cpu: this paradyse was built without NCCL (CUDA and NCCL were not found at configure "
      "time), so it cannot communicate between GPUs");
#endif
}

}  // namespace paradyse::real
