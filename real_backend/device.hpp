// What the real backend needs of its device beyond tensors: which GPU a rank runs on, waiting for
// the device, reading values back to the host, random generators on the device, the caching
// allocator's figures and time stamps taken in the device's order. The CUDA half exists only in a
// build against a LibTorch with CUDA (PARADYSE_TORCH_CUDA); on CPU every call is the trivial one.
// This file is the one place that knows the difference.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace paradyse::real {

// The GPU of the rank that is `local_rank` on its machine: that same index, as torchrun, mpirun and
// srun number ranks per node. NCCL cannot run two ranks on one GPU, so a local rank beyond the
// machine's `gpus` is an InputError that says how many ranks fit.
int gpu_of_local_rank(int local_rank, int gpus);

// GPUs this process sees (0 with a CPU-only LibTorch).
int visible_gpus();

// Waits until everything queued on the device (every stream) has run; nothing on CPU.
void synchronize(const at::Device& device);

// `t`'s values on the host, once the current stream has produced them (a blocking copy, ordered
// after the kernels and the waited-for communications that wrote them): the one way a run reads
// device memory, so that no read races the stream.
at::Tensor on_host(const at::Tensor& t);

// `values` on `device` without making the host wait: through pinned memory on a GPU (a copy from
// pageable memory would wait for the stream).
at::Tensor on_device(const std::vector<int64_t>& values, const at::Device& device);

// What the device is: the GPU's name and memory, or on CPU the processor's model and the machine's
// physical memory.
std::string device_name(const at::Device& device);
int64_t device_memory_bytes(const at::Device& device);
// The machine's physical memory.
int64_t host_memory_bytes();

// A generator for random tensors made on `device` (Philox on a GPU), seeded with `seed`.
at::Generator make_generator(const at::Device& device, uint64_t seed);

// The CUDA caching allocator's peaks since the last reset, on a GPU; zeros on CPU.
struct DeviceMemory {
  int64_t allocated_peak_bytes = 0;  // tensor storage
  int64_t reserved_peak_bytes = 0;   // segments the allocator took from the driver
};
DeviceMemory device_memory_peaks(const at::Device& device);
void reset_device_memory_peaks(const at::Device& device);

// Copies between device and host memory beside the compute stream: on a GPU, a stream of its own
// that the copy engines run while kernels run on the current stream; on CPU each copy runs at once.
class CopyStream {
 public:
  explicit CopyStream(const at::Device& device);
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;

  // to.copy_(from), after the work queued so far on the current stream. Device memory on either side
  // is kept from the caching allocator until the copy has run, whoever still holds it.
  void copy(const at::Tensor& to, const at::Tensor& from);
  // The current stream waits for every copy queued so far.
  void wait();
  // `bytes` of host memory a copy runs from or to without making the host wait (pinned, on a GPU).
  at::Tensor host_bytes(int64_t bytes) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Time stamps in the order the device runs the work queued before them. On CPU, where ops are
// synchronous, a stamp is the wall clock when it is taken; on a GPU it is an event recorded on the
// current stream, and reading it waits for that event only. Taking stamps never makes the host wait,
// so a step profiled op by op runs as asynchronously as one that is not.
class DeviceClock {
 public:
  using Stamp = std::size_t;

  explicit DeviceClock(const at::Device& device);
  ~DeviceClock();
  DeviceClock(const DeviceClock&) = delete;
  DeviceClock& operator=(const DeviceClock&) = delete;

  Stamp stamp();
  // Seconds from the clock's origin (its construction or the last restart) to `stamp`.
  double seconds(Stamp stamp) const;
  // A new origin, now; earlier stamps are forgotten.
  void restart();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace paradyse::real
