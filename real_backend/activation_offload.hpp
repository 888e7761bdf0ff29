// Activation offload on real tensors (Backend::offload_mark and the calls after it). While a mark is
// open every handle the backend makes is noted, and whether its storage is new (a view of a storage
// made before, a weight's or an earlier layer's, is not: the tracer's buffers are storages, its views
// share them). offload_start copies to host memory, on the copy stream, the new storages that
// something still holds (and those of `also`), but not a storage that a kept handle shares; offload_finish
// makes the compute stream wait for the copies and moves the handles onto them, which frees the device
// storage where nothing else holds it. Reloading copies the storages back into new device memory and moves
// the handles back. A storage moves whole and once, whatever views of it the handles are, so views stay
// views. On CPU the copies run as well, into separate buffers, so that every device runs the same
// bookkeeping. The device memory a storage comes back into counts in the backend's held bytes from
// reload_start, when it is allocated.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "real_backend/device.hpp"
#include "real_backend/torch_tensor.hpp"

namespace paradyse::real {

class ActivationOffload {
 public:
  // `held`: the backend's held bytes, which count a storage coming back from its allocation on.
  ActivationOffload(const at::Device& device, std::shared_ptr<HeldBytes> held);
  ~ActivationOffload();

  void made(const std::shared_ptr<TorchTensor>& handle);  // every handle the backend makes
  int64_t mark();
  int64_t start(int64_t mark, const std::vector<std::shared_ptr<TorchTensor>>& also,
                const std::vector<std::shared_ptr<TorchTensor>>& keep);
  void finish(int64_t offloaded);
  void reload_start(int64_t offloaded);
  void reload_finish(int64_t offloaded);
  // Host memory that offloaded storages take now.
  int64_t host_bytes() const { return host_bytes_; }

 private:
  struct Handle {
    std::weak_ptr<TorchTensor> handle;
    at::ScalarType type;
    std::vector<int64_t> sizes, strides;
    int64_t offset;
  };
  struct Storage {
    int64_t bytes = 0;
    at::Tensor device, host;  // the storage as bytes, on each side while it is there
    std::vector<Handle> handles;
  };
  using Set = std::vector<Storage>;
  Set& set(int64_t offloaded);

  at::Device device_;
  std::shared_ptr<HeldBytes> held_;
  CopyStream copies_;
  int open_marks_ = 0;
  int64_t made_before_ = 0;  // handles noted before made_[0], across marks
  struct Made {
    std::weak_ptr<TorchTensor> handle;
    bool new_storage;
  };
  std::vector<Made> made_;
  std::vector<Set> sets_;
  int64_t outstanding_ = 0;  // sets not reloaded yet
  int64_t host_bytes_ = 0;
};

}  // namespace paradyse::real
