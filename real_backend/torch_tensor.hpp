// A tensor handle of the real backend: its LibTorch tensor, whose storage counts in the backend's
// HeldBytes while any handle on it lives there. An offloaded handle's tensor lives in host memory and
// does not count.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "program/tensor.hpp"
#include "real_backend/held_bytes.hpp"

namespace paradyse::real {

struct TorchTensor final : TensorImpl {
  TorchTensor(at::Tensor tensor, std::shared_ptr<HeldBytes> held)
      : t(std::move(tensor)), held_(std::move(held)) {
    held_->hold(storage(), bytes());
  }
  ~TorchTensor() override {
    if (counted_) held_->release(storage(), bytes());
  }
  TorchTensor(const TorchTensor&) = delete;
  TorchTensor& operator=(const TorchTensor&) = delete;

  const void* storage() const { return t.storage().unsafeGetStorageImpl(); }
  int64_t bytes() const { return static_cast<int64_t>(t.storage().nbytes()); }
  bool offloaded() const { return !counted_; }
  // The same values in other memory: device memory that counts, or host memory that does not.
  void move_to(at::Tensor other, bool counted) {
    if (counted_) held_->release(storage(), bytes());
    t = std::move(other);
    counted_ = counted;
    if (counted_) held_->hold(storage(), bytes());
  }

  at::Tensor t;

 private:
  std::shared_ptr<HeldBytes> held_;
  bool counted_ = true;
};

}  // namespace paradyse::real
