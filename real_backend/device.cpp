#include "real_backend/device.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>

#include "common/errors.hpp"

#ifdef PARADYSE_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace paradyse::real {

int gpu_of_local_rank(int local_rank, int gpus) {
  if (local_rank < 0)
    throw InputError("", 0, "local rank", "expected 0 or more, got " + std::to_string(local_rank));
  if (local_rank >= gpus)
    throw InputError("", 0, "--ranks",
                     "local rank " + std::to_string(local_rank) + " needs GPU " + std::to_string(local_rank) +
                         ", but this machine shows " + std::to_string(gpus) + " GPU" +
                         (gpus == 1 ? "" : "s") + ": NCCL runs one rank per GPU, so run at most " +
                         std::to_string(gpus) +
                         " ranks a machine (--gloo-on-device runs more on one GPU, for numerics)");
  return local_rank;
}

int visible_gpus() {
  return static_cast<int>(at::getNumGPUs());
}

at::Tensor on_host(const at::Tensor& t) {
  return t.to(at::kCPU, /*non_blocking=*/false, /*copy=*/false).contiguous();
}

at::Tensor on_device(const std::vector<int64_t>& values, const at::Device& device) {
  at::Tensor host = at::tensor(values, at::kLong);
  if (!device.is_cuda()) return host;
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

namespace {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const std::size_t colon = line.find(':');
    if (line.rfind("model name", 0) != 0 || colon == std::string::npos) continue;
    const std::size_t value = line.find_first_not_of(" \t", colon + 1);
    if (value != std::string::npos) return line.substr(value);
  }
  return "CPU";
}

int64_t physical_memory_bytes() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
}

}  // namespace

int64_t host_memory_bytes() {
  return physical_memory_bytes();
}

#ifdef PARADYSE_TORCH_CUDA

std::string device_name(const at::Device& device) {
  return device.is_cuda() ? std::string(at::cuda::getDeviceProperties(device.index())->name) : cpu_model();
}

int64_t device_memory_bytes(const at::Device& device) {
  return device.is_cuda()
             ? static_cast<int64_t>(at::cuda::getDeviceProperties(device.index())->totalGlobalMem)
             : physical_memory_bytes();
}

void synchronize(const at::Device& device) {
  if (!device.is_cuda()) return;
  const c10::cuda::CUDAGuard guard(device);
  c10::cuda::device_synchronize();
}

at::Generator make_generator(const at::Device& device, uint64_t seed) {
  at::Generator generator = device.is_cuda() ? at::make_generator<at::CUDAGeneratorImpl>(device.index())
                                             : at::make_generator<at::CPUGeneratorImpl>(seed);
  generator.set_current_seed(seed);
  return generator;
}

DeviceMemory device_memory_peaks(const at::Device& device) {
  if (!device.is_cuda()) return {};
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  constexpr auto all = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return {stats.allocated_bytes[all].peak, stats.reserved_bytes[all].peak};
}

void reset_device_memory_peaks(const at::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

#else  // a CPU-only LibTorch: the device is the CPU

std::string device_name(const at::Device&) {
  return cpu_model();
}

int64_t device_memory_bytes(const at::Device&) {
  return physical_memory_bytes();
}

void synchronize(const at::Device&) {}

at::Generator make_generator(const at::Device& device, uint64_t seed) {
  PARADYSE_CHECK(!device.is_cuda(), "a CUDA generator in a build without CUDA");
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

DeviceMemory device_memory_peaks(const at::Device&) {
  return {};
}

void reset_device_memory_peaks(const at::Device&) {}

#endif

// CPU: copies at once. GPU: a stream from the pool, ordered after the current stream by an event, and
// an event after its last copy for the current stream to wait on.
struct CopyStream::Impl {
  explicit Impl(const at::Device& d) : device(d) {}
  at::Device device;
#ifdef PARADYSE_TORCH_CUDA
  std::optional<c10::cuda::CUDAStream> stream;
  c10::cuda::CUDAEvent done;
  bool pending = false;
#endif
};

CopyStream::CopyStream(const at::Device& device) : impl_(std::make_unique<Impl>(device)) {
#ifdef PARADYSE_TORCH_CUDA
  if (device.is_cuda())
    impl_->stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
#endif
}
CopyStream::~CopyStream() = default;

void CopyStream::copy(const at::Tensor& to, const at::Tensor& from) {
#ifdef PARADYSE_TORCH_CUDA
  if (impl_->device.is_cuda()) {
    const c10::cuda::CUDAGuard guard(impl_->device);
    const c10::cuda::CUDAStream copies = *impl_->stream;
    c10::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(impl_->device.index()));
    ready.block(copies);
    {
      const c10::cuda::CUDAStreamGuard on_copies(copies);
      at::Tensor(to).copy_(from, /*non_blocking=*/true);
    }
    // Memory the compute stream frees before the copy has run must not be reused under it.
    for (const at::Tensor* side : {&to, &from})
      if (side->is_cuda()) c10::cuda::CUDACachingAllocator::recordStream(side->storage().data_ptr(), copies);
    impl_->done.record(copies);
    impl_->pending = true;
    return;
  }
#endif
  at::Tensor(to).copy_(from);
}

void CopyStream::wait() {
#ifdef PARADYSE_TORCH_CUDA
  if (impl_->device.is_cuda() && impl_->pending) {
    const c10::cuda::CUDAGuard guard(impl_->device);
    impl_->done.block(c10::cuda::getCurrentCUDAStream(impl_->device.index()));
  }
#endif
}

at::Tensor CopyStream::host_bytes(int64_t bytes) const {
  return at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(impl_->device.is_cuda()));
}

// CPU: the wall clock. GPU: timing events on the current stream, read against an origin event.
struct DeviceClock::Impl {
  explicit Impl(const at::Device& d) : device(d) {}
  at::Device device;
  std::chrono::steady_clock::time_point origin_time;
  std::vector<double> times;
#ifdef PARADYSE_TORCH_CUDA
  c10::cuda::CUDAEvent origin{cudaEventDefault};
  std::vector<c10::cuda::CUDAEvent> events;
#endif

  void restart() {
    times.clear();
    origin_time = std::chrono::steady_clock::now();
#ifdef PARADYSE_TORCH_CUDA
    events.clear();
    if (device.is_cuda()) {
      const c10::cuda::CUDAGuard guard(device);
      origin = c10::cuda::CUDAEvent(cudaEventDefault);
      origin.record();
    }
#endif
  }
  std::size_t stamp() {
#ifdef PARADYSE_TORCH_CUDA
    if (device.is_cuda()) {
      const c10::cuda::CUDAGuard guard(device);
      events.emplace_back(cudaEventDefault);
      events.back().record();
      return events.size() - 1;
    }
#endif
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_time).count());
    return times.size() - 1;
  }
  double seconds(std::size_t stamp) const {
#ifdef PARADYSE_TORCH_CUDA
    if (device.is_cuda()) {
      const c10::cuda::CUDAEvent& event = events.at(stamp);
      event.synchronize();
      return static_cast<double>(origin.elapsed_time(event)) / 1e3;
    }
#endif
    return times.at(stamp);
  }
};

DeviceClock::DeviceClock(const at::Device& device) : impl_(std::make_unique<Impl>(device)) {
  impl_->restart();
}
DeviceClock::~DeviceClock() = default;

DeviceClock::Stamp DeviceClock::stamp() {
  return impl_->stamp();
}
double DeviceClock::seconds(Stamp stamp) const {
  return impl_->seconds(stamp);
}
void DeviceClock::restart() {
  impl_->restart();
}

}  // namespace paradyse::real
