// Tensor handles as strategies see them: a shape, an element type and an opaque backend object (a
// LibTorch tensor, or a shape-only buffer of the tracing backend). Copies share the object; the
// backend frees it when the last handle goes, which is how the tracer sees frees.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "common/errors.hpp"

namespace paradyse {

enum class DType : uint8_t { bf16, fp32, int64, u8 };

constexpr int dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return 2;
    case DType::fp32:
      return 4;
    case DType::int64:
      return 8;
    case DType::u8:
      return 1;
  }
  return 0;
}

// Tensors have at most four dimensions but for a few joins: held in the handle, not in an allocation
// of their own (tracing a step makes a tensor handle per op, and the simulator traces every step it runs).
using Shape = boost::container::small_vector<int64_t, 4>;

std::string to_string(const Shape& shape);  // "[1, 4096, 1024]"

// A tensor too large to count in bytes: whatever holds it runs out of memory. Selectors treat the
// strategy that needs it as unable to run that length; asked for alone, it is the user's error.
class TensorTooLarge : public InputError {
 public:
  using InputError::InputError;
};

class TensorImpl {
 public:
  virtual ~TensorImpl() = default;
};

class Tensor {
 public:
  Tensor() = default;
  // TensorTooLarge when the tensor would hold more bytes than int64 counts: lengths and model shapes
  // are bounded (common/limits.hpp, load_model), but their products at a low degree can get there.
  Tensor(Shape shape, DType dtype, std::shared_ptr<TensorImpl> impl);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // Size of dimension `dim`; negative counts from the end, as in PyTorch.
  int64_t size(int dim) const { return shape_.at(static_cast<std::size_t>(dim < 0 ? dim + rank() : dim)); }
  DType dtype() const { return dtype_; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape_) n *= d;
    return n;
  }
  uint64_t bytes() const { return static_cast<uint64_t>(numel()) * dtype_bytes(dtype_); }

  // The backend's object; the backend that made the tensor knows its type.
  template <class Impl>
  Impl& impl() const {
    PARADYSE_CHECK(impl_ != nullptr, "use of an undefined tensor");
    return static_cast<Impl&>(*impl_);
  }
  const std::shared_ptr<TensorImpl>& shared_impl() const { return impl_; }

 private:
  Shape shape_;
  DType dtype_ = DType::bf16;
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace paradyse
