#include "real_backend/connect.hpp"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <utility>

#include "common/errors.hpp"
#include "real_backend/device.hpp"
#include "real_backend/gloo_communicator.hpp"
#include "real_backend/staged_communicator.hpp"
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

at::Device rank_device(const RankEnvironment& env, bool cuda, bool gloo_on_device) {
  if (!cuda) return at::kCPU;
  const int gpus = visible_gpus();
  if (gpus == 0) throw InputError("", 0, "--device", "expected cpu: no GPU is visible to this rank");
  const int gpu = gloo_on_device ? env.local_rank % gpus : gpu_of_local_rank(env.local_rank, gpus);
  return {at::kCUDA, static_cast<c10::DeviceIndex>(gpu)};
}

std::unique_ptr<Communicator> connect(const RankEnvironment& env, const at::Device& device,
                                      bool gloo_on_device, std::chrono::milliseconds timeout) {
  auto store = open_store(env, timeout);
  if (!device.is_cuda() || gloo_on_device) {
    auto gloo = make_gloo_communicator(store, env.rank, env.size, timeout);
    return device.is_cuda() ? make_staged_communicator(std::move(gloo), device) : std::move(gloo);
  }
#ifdef PARADYSE_WITH_NCCL
  return make_nccl_communicator(store, env.rank, env.size, device.index(), timeout);
#else
  throw InputError("", 0, "--device",
                   "expected cpu, or --gloo-on-device: this paradyse was built without NCCL (not found at "
                   "configure time), so its GPUs cannot communicate through it");
#endif
}

}  // namespace paradyse::real
