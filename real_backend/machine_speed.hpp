// The machine's speed as the time of one fixed piece of a training step, so that a measurement can
// be told apart from the machine drifting under it. calibrate times the reference when it measures
// the machine; validate times it again around every row it measures: on a shared machine (a virtual
// machine's vCPUs share their host's cores with other tenants) the same work took 0.55–1.1× its
// usual time from one minute to the next on this project's development VM, so a model calibrated
// at one moment and a run measured at another can differ by the machine alone.
#pragma once

#include <cstdint>
#include <string>

#include "real_backend/rank_timer.hpp"
#include "real_backend/torch_backend.hpp"
#include "strategies/model.hpp"

namespace paradyse::real {

// The attention a rank of `ranks` computes when the model's heads are split over the ranks.
struct AttentionShape {
  int64_t heads = 1, kv_heads = 1, head_dim = 1;
};
AttentionShape local_attention_shape(const ModelSpec& model, int ranks);

// One attention forward + backward of TorchBackend (what a step runs) over one sequence of `tokens`,
// or its forward alone, on every rank at once: the RankTimer's slowest-rank median.
enum class AttentionPass { forward_backward, forward };
double attention_pass_s(const RankTimer& timer, TorchBackend& backend, const AttentionShape& shape,
                        bool causal, int64_t tokens, AttentionPass pass = AttentionPass::forward_backward);

// The reference: attention_pass_s, causal, over kReferenceTokens at the model's local shape: a mix
// of GEMMs and memory-bound float32 passes, as a step is, lasting tens of milliseconds on a CPU.
constexpr int64_t kReferenceTokens = 512;
double reference_seconds(Communicator& communicator, TorchBackend& backend, const ModelSpec& model);
std::string reference_description(const ModelSpec& model, int ranks);

}  // namespace paradyse::real
