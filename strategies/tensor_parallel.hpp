// Megatron-LM's parallel linear layers over the parallel group (Shoeybi et al. 2019), with or without
// sequence parallelism (Korthikanti et al. 2022), written once as Megatron writes them: one code path,
// the sequence-parallel switch deciding only the communication at a sublayer's two ends. MegatronTS and
// MegatronTP run them over their whole group; TP × CP (tp_cp.cpp) over a part of it, on weight shards
// it gathers for that part. Column-parallel W_qkv / W_in and row-parallel W_proj / W_out run on this
// rank's heads / FFN columns: their `[rows, h]` shards, rows over the group.
#pragma once

#include <functional>

#include "strategies/strategy.hpp"

namespace paradyse::tensor_parallel {

// Takes a shard's weight gradient where it is computed: adds it into the shard's gradient (MegatronTS),
// or sums it over the ranks that share the shard first (TP × CP).
using WeightGradSink = std::function<void(const Tensor& weight_grad)>;

// The communication at a sublayer's ends. With SP: in/out [b, s/p, h], all-gather in, reduce-scatter out.
// Without: in/out [b, s, h] on every rank, all-reduce out.
struct Ends {
  bool sequence_parallel = true;

  // A sublayer's input (forward) or output gradient (backward) over the whole sequence.
  Tensor whole_sequence(Backend& be, const Tensor& x) const;
  // The row-parallel GEMM's partial sums [b, s, h], summed over ranks: this rank's shard with SP.
  Tensor sum_partials(Backend& be, const Tensor& partial) const;
  // Of a column-parallel linear x·Wᵀ: d_x = d_out·W summed over ranks, and W's gradient d_outᵀ·x given
  // to `grad`. The reduction runs behind the weight-gradient GEMM; with SP the input is re-gathered
  // first, behind the dgrad GEMM.
  Tensor input_grad_behind_weight_grad(Backend& be, const Tensor& d_out, const Tensor& w, const Tensor& x,
                                       const WeightGradSink& grad) const;
};

// q [b, s, a/p, d], k and v [b, s, a_kv/p, d]: views of this rank's heads in a QKV projection
// [b, s, (h + 2h_kv)/p].
struct HeadViews {
  Tensor q, k, v;
};
HeadViews split_heads(Backend& be, const ModelSpec& model, const Tensor& qkv);
// dq, dk, dv back as one [b, s, (h + 2h_kv)/p] gradient of the projection.
Tensor join_heads(Backend& be, const Tensor& d_q, const Tensor& d_k, const Tensor& d_v);

// The MLP: column-parallel W_in, the activation, row-parallel W_out, on shards w_in [f_in/p, h] and
// w_out [f/p, h].
struct MlpSaved final : SavedActivations {
  Tensor x;    // the sublayer input: this rank's [b, s/p, h] with SP, else [b, s, h]
  Tensor pre;  // [b, s, f_in/p]
  Tensor act;  // [b, s, f/p]
};
SublayerOutput mlp_forward(Backend& be, const ModelSpec& model, const Ends& ends, const Tensor& w_in,
                           const Tensor& w_out, const Tensor& x);
// Returns d_x; gives the shards' gradients to grad_out, then grad_in.
Tensor mlp_backward(Backend& be, const ModelSpec& model, const Ends& ends, const Tensor& w_in,
                    const Tensor& w_out, MlpSaved& saved, const Tensor& d_y, const WeightGradSink& grad_in,
                    const WeightGradSink& grad_out);
// A sink that adds into `grad`.
WeightGradSink add_into(Backend& be, Tensor& grad);

}  // namespace paradyse::tensor_parallel
