#include "strategies/tensor.hpp"

#include "strategies/backend.hpp"

namespace paradyse {

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
