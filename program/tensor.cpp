#include "program/tensor.hpp"

#include "program/backend.hpp"

namespace paradyse {

Tensor::Tensor(Shape shape, DType dtype, std::shared_ptr<TensorImpl> impl)
    : shape_(std::move(shape)), dtype_(dtype), impl_(std::move(impl)) {
  int64_t bytes = dtype_bytes(dtype_);
  for (int64_t d : shape_) {
    PARADYSE_CHECK(d >= 0, "a negative dimension in " + paradyse::to_string(shape_));
    if (__builtin_mul_overflow(bytes, d, &bytes))
      throw TensorTooLarge("", 0, "seq",
                           "out of memory: a tensor of shape " + paradyse::to_string(shape_) +
                               " would hold more than 2^63 bytes (no GPU holds this length at this degree)");
  }
}

std::string to_string(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string_view to_string(Phase phase) {
  switch (phase) {
    case Phase::embedding_forward:
      return "embedding_forward";
    case Phase::layer_forward:
      return "layer_forward";
    case Phase::head:
      return "head";
    case Phase::layer_backward:
      return "layer_backward";
    case Phase::embedding_backward:
      return "embedding_backward";
    case Phase::optimizer:
      return "optimizer";
  }
  return "?";
}

}  // namespace paradyse
