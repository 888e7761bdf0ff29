// The one-device reference the real backend is checked against: the same Transformer written
// directly in LibTorch on whole tensors, in natural token order, differentiated by autograd. It
// shares nothing with the strategies but the weights' definition (ModelWeights::full).
#pragma once

#include <ATen/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "real_backend/model_weights.hpp"
#include "strategies/model.hpp"

namespace paradyse::testing {

using NamedTensors = std::map<std::string, at::Tensor>;

// The whole logical weights of `num_layers` layers and the embedding, head and final norm, as
// ModelWeights defines them, with the vocabulary padded for `degree` as training_step pads it.
NamedTensors reference_weights(const ModelSpec& model, int num_layers, int degree, uint64_t seed);

struct ReferenceLayer {
  at::Tensor y, d_x;   // [b, s, h]
  NamedTensors grads;  // by weight name without the "layers.N." prefix
};
// One layer (weights "layers.<layer>.*") on x [b, s, h]; backward from d_y.
ReferenceLayer reference_layer(const ModelSpec& model, const NamedTensors& weights, int layer,
                               const at::Tensor& x, const at::Tensor& d_y);

struct ReferenceStep {
  at::Tensor loss;     // summed cross-entropy of the tokens whose target is not negative
  NamedTensors grads;  // by full weight name
};
ReferenceStep reference_step(const ModelSpec& model, const NamedTensors& weights, int num_layers,
                             const at::Tensor& tokens, const at::Tensor& targets);
// A packed sequence of `documents` (lengths, summing to the sequence's): each document a sequence of its
// own, losses and gradients summed.
ReferenceStep reference_step_by_document(const ModelSpec& model, const NamedTensors& weights, int num_layers,
                                         const at::Tensor& tokens, const at::Tensor& targets,
                                         const std::vector<int64_t>& documents);

}  // namespace paradyse::testing
