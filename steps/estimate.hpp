// Time and memory of one training iteration (one micro-batch of b sequences of s tokens on p GPUs,
// optimizer step included) for a per-layer plan of strategies, from traced programs and the cluster.
//
// Usage:
//   steps::Estimator estimator(model, cluster);
//   Estimate e = estimator.estimate(megatron_ts(), {.tokens = 32768});
//   Estimate mixed = estimator.estimate(plan, {.tokens = 32768});  // a strategy per layer
//
// A plan's layers are priced from one traced layer per strategy: the iteration is the embedding,
// each layer's forward (its own strategy's), the head, each layer's backward, the embedding's
// backward and the optimizer, in that order. Memory is folded along the same order, so the peak is
// the static terms plus the saved activations of every layer plus the largest transient, wherever
// it happens (not "whole-model peak ÷ L"). A plan that offloads a layer's activations is traced and
// priced whole, phase by phase, since what an offloaded layer costs depends on its neighbours (its
// copies run under their compute). Ranks are symmetric in every strategy, so rank 0 is traced.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "costmodel/program_cost.hpp"
#include "hw_models/cluster.hpp"
#include "steps/cost_table.hpp"
#include "strategies/micro_batch.hpp"
#include "strategies/strategy.hpp"
#include "strategies/training_step.hpp"

namespace paradyse::steps {

struct EstimateRequest {
  int64_t tokens = 0;         // per sequence, before padding
  int degree = 0;             // 0: every GPU of the cluster
  int64_t batch = 1;          // sequences per micro-batch
  int64_t micro_batches = 1;  // of the global batch: gradients accumulate, the optimizer runs once
  // A packed sequence: its documents' tokens before padding, summing to `tokens` (which may be left 0);
  // attention stays within each. Empty: one document.
  std::vector<int64_t> documents = {};
  // Whether the step's gradient norm exceeds the clipping limit, so that it scales every gradient
  // (StepSpec::gradients_clipped; default: the steady state, within the limit).
  bool gradients_clipped = false;
};

struct TimeBreakdown {
  double forward_s = 0;   // embedding, layers, head with its loss gradient (fused)
  double backward_s = 0;  // layers and embedding
  double optimizer_s = 0;
  double total_s = 0;
  double compute_s = 0;                // busy time of the compute stream
  double exposed_communication_s = 0;  // time the compute stream waits for communication
  double host_bound_s = 0;             // time the compute stream waits for the host to issue its calls
};

struct MemoryBreakdown {               // per rank
  double weights_bytes = 0;            // bf16 shards
  double gradients_bytes = 0;          // fp32 main gradients of the shards
  double optimizer_states_bytes = 0;   // fp32 master weights and two Adam moments
  double saved_activations_bytes = 0;  // kept by every layer at the end of the forward
  double transient_bytes = 0;          // the peak's working set above the saved activations
  double fragmentation_bytes = 0;      // what the caching allocator holds beyond live tensors
  double peak_bytes = 0;               // the sum of the above
  double capacity_bytes = 0;           // HBM minus what CUDA and NCCL reserve
  // Activation offload: host memory the rank's offloaded activations take at their peak, and what the
  // host gives each GPU (GpuSpec::host_memory_bytes).
  double offloaded_bytes = 0;
  double host_capacity_bytes = 0;
};

struct Estimate {
  std::string plan;  // plan_name(): the strategy, or one name per layer
  int64_t tokens = 0;
  int64_t padded_tokens = 0;  // SequenceLayout::padded_length: the next multiple of p (2p when causal)
  int64_t documents = 1;      // packed in the sequence, each padded on its own
  int degree = 0;
  int64_t batch = 1;
  int64_t micro_batches = 1;
  TimeBreakdown time;  // forward and backward summed over the micro-batches
  MemoryBreakdown memory;
  bool fits = false;
  double flops = 0;        // executed by all ranks, recomputation included
  double model_flops = 0;  // Korthikanti et al. 2022 App. A, generalised to GQA/SwiGLU, causal-aware
  double mfu = 0;          // model FLOPs / (time · p · peak)
  double comm_bytes = 0;   // bus bytes per rank (nccl-tests convention)
};

class Estimator {
 public:
  Estimator(ModelSpec model, hw::ClusterSpec cluster);
  ~Estimator();

  // Throws InputError when the request is invalid or a strategy cannot run it (the message says why).
  Estimate estimate(const Plan& plan, const EstimateRequest& request);
  // Every layer `strategy` with `recompute`.
  Estimate estimate(const Strategy& strategy, const EstimateRequest& request,
                    Recompute recompute = Recompute::none);
  // What a selector prices plans with at `request`: one layer of each candidate the degree allows
  // and the rest of the step. Its plan_s and plan_peak_bytes equal estimate(plan)'s.
  CostTable cost_table(const std::vector<std::pair<const Strategy*, Recompute>>& candidates,
                       const EstimateRequest& request);
  // Why `strategy` cannot run at `degree`, if it cannot.
  std::optional<std::string> unsupported(const Strategy& strategy, int degree) const;

  const ModelSpec& model() const { return model_; }
  const hw::ClusterSpec& cluster() const { return cluster_; }
  void clear_cache();

  struct StrategyCosts;  // one traced layer of a strategy, priced by phase

 private:
  // `padded_documents`: the cost key of the micro-batch (MicroBatch::cost_key).
  const StrategyCosts& strategy_costs(const Strategy& strategy, int degree,
                                      const std::vector<int64_t>& padded_documents, int64_t batch,
                                      Recompute recompute, bool gradients_clipped);

  ModelSpec model_;
  hw::ClusterSpec cluster_;
  std::shared_ptr<const costmodel::RoutedCollectiveTimer>
      routed_;  // shared by the traced layers: each group routed once
  std::map<std::tuple<const Strategy*, int, std::vector<int64_t>, int64_t, Recompute, bool>,
           std::unique_ptr<StrategyCosts>>
      traced_;
  // By plan, degree, requested tokens and documents (none for one sequence), batch, micro-batches and
  // whether the gradients are clipped.
  std::map<std::tuple<Plan, int, int64_t, std::vector<int64_t>, int64_t, int64_t, bool>, Estimate> estimates_;
};

// The request's micro-batch: its documents, or one sequence of its tokens.
MicroBatch micro_batch_of(const EstimateRequest& request);

// `request` with its degree filled in (0: every GPU); throws InputError unless its length, batch and
// degree are in range.
EstimateRequest checked_request(const hw::ClusterSpec& cluster, EstimateRequest request);
// The same, and throws InputError unless `plan` has one
// strategy per layer of `model`, each able to run at that degree, and the request is in range.
EstimateRequest checked_request(const ModelSpec& model, const hw::ClusterSpec& cluster, const Plan& plan,
                                EstimateRequest request);

// Bytes per rank of weights, gradients and optimizer state (into those fields of `memory`): every
// matrix is sharded 1/p, norm weights are replicated; 18 bytes per parameter (bf16 weight, fp32 main
// gradient, fp32 master weight and Adam moments), as Megatron-LM keeps them. WeightLayout::job: each
// layer's weights, norms included, are one flat tensor padded to a multiple of p and sharded 1/p
// (a grouped step's, grouped_step.hpp).
void static_memory(const ModelSpec& model, int degree, MemoryBreakdown& memory,
                   WeightLayout layout = WeightLayout::group);
// Their sum: what a rank holds before any activation.
double static_memory_bytes(const ModelSpec& model, int degree, WeightLayout layout = WeightLayout::group);

// Model FLOPs of one iteration (forward and backward, no recomputation), as MFU counts them: attention
// over the pairs within each document of a packed micro-batch.
double model_flops(const ModelSpec& model, const MicroBatch& micro_batch, int64_t batch);
double model_flops(const ModelSpec& model, int64_t tokens, int64_t batch);

}  // namespace paradyse::steps
