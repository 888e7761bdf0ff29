// A parallel strategy: how one Transformer layer's attention and MLP run on p ranks, forward and
// backward, written once against Backend. Every strategy takes and returns activations in the
// unified layout [b, s/p, h] (sequence_layout.hpp) and keeps weights in the fixed shards of
// LayerWeights, so plans may switch strategy at any layer boundary with no data movement.
#pragma once

#include <compare>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "program/backend.hpp"
#include "strategies/model.hpp"
#include "strategies/sequence_layout.hpp"

namespace paradyse {

// What a layer keeps for backward. none: everything backward needs. selective: what Megatron-LM's
// recompute_granularity "selective" means (Korthikanti et al. 2022 §4.2): the attention core (QKᵀ,
// softmax, dropout, ×V; core_attention.hpp) runs again in backward and keeps nothing but its output,
// everything else is kept. It saves the unfused kernel's s² terms, and with FlashAttention only the
// log-sum-exp; ring strategies, whose blocks' backward needs the merged log-sum-exp of the whole row,
// keep theirs. full: only the layer input is kept and the whole layer runs again before its backward.
// offload: nothing runs again; what the layer keeps waits in host memory between its forward and its
// backward (Megatron-LM's --cpu-offloading): copied out while the next layer's forward runs, back while
// the next layer's backward runs (micro_batch_pass.hpp). The last layer, whose backward follows at once,
// keeps its activations.
enum class Recompute : uint8_t { none, selective, full, offload };
std::string_view to_string(Recompute recompute);
std::optional<Recompute> parse_recompute(std::string_view text);

// This rank's fixed 1/p shard of one layer's weights (the unified layout of ParaDySe, Ou et al., AAAI-26,
// Table 2: W_qkv (3h/p × h)ᵀ, W_proj h/p × h, W_in (4h/p × h)ᵀ, W_out 4h/p × h).
// Dim 0 is the sharded dim of every matrix, so the tensor-parallel shard is also the ZeRO-3 shard:
// W_qkv and W_in are stored [out, in] and used as x·Wᵀ (column-parallel), W_proj and W_out stored
// [in, out] and used as x·W (row-parallel). Rank r's rows are the r-th p-th of the query rows, then of
// the key rows, then of the value rows: its heads r·a/p … (r+1)·a/p − 1 when p divides the heads, parts
// of heads otherwise (which only a strategy that gathers the weights whole can use).
struct LayerWeights {
  Tensor qkv;      // [(h + 2·h_kv)/p, h]: this rank's h/p query rows, then h_kv/p key, then value rows
  Tensor proj;     // [h/p, h]: the rows that take this rank's query rows' output
  Tensor mlp_in;   // [f/p, h] (GELU) or [2f/p, h]: this rank's f/p gate rows, then its f/p up rows
  Tensor mlp_out;  // [f/p, h]
  Tensor norm1_gamma, norm1_beta, norm2_gamma, norm2_beta;  // [h], on every rank; beta only for LayerNorm
  // The matrices are whole, not shards: [h + 2h_kv, h] (all query heads, then key, then value heads),
  // [h, h], [f_in, h] (all gate rows, then up rows), [f, h]. A grouped step gathers each layer's weights
  // whole from the job's shards (grouped_step.hpp), and a strategy that uses whole weights then
  // gathers nothing more, and adds whole gradients (zero3.hpp).
  bool whole = false;

  // Rows of each rank's shard that belong together when a whole matrix is rebuilt from the shards:
  // {a/p·d, a_kv/p·d, a_kv/p·d} for W_qkv, {f/p, f/p} for a SwiGLU W_in, {rows} otherwise.
  static std::vector<int64_t> qkv_groups(const ModelSpec& model, int degree);
  static std::vector<int64_t> mlp_in_groups(const ModelSpec& model, int degree);
  // Where rank `rank`'s shard lies in the whole matrix, for shards of row groups `groups`: group g
  // of the shard is rows [start_g·p + rank·g, +g) of the whole matrix, start_g the rows of the groups
  // before it in one shard, so that the whole matrix keeps each group's rows of all ranks together.
  struct RowBlock {
    int64_t whole_start, shard_start, rows;
  };
  static std::vector<RowBlock> shard_blocks(const std::vector<int64_t>& groups, int degree, int rank);
};

struct LayerContext {
  const ModelSpec& model;
  const SequenceLayout& layout;  // which tokens this rank holds
  int64_t batch = 1;
  Recompute recompute = Recompute::none;
};

class SavedActivations {
 public:
  virtual ~SavedActivations() = default;
};

struct SublayerOutput {
  Tensor y;                                 // [b, s/p, h]
  std::unique_ptr<SavedActivations> saved;  // what backward needs
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  virtual std::string_view name() const = 0;  // the paper's name in snake case: "megatron_ts"
  virtual std::string_view summary() const = 0;

  // Why this strategy cannot run `model` at `degree`, if it cannot. By default the paper's unified
  // layout: every rank owns whole heads (whole_heads) and 1/p of every weight matrix's rows
  // (layout_rows); strategies add their own conditions, and USP, whose ring members need not own whole
  // heads, asks only for the rows.
  virtual std::optional<std::string> unsupported(const ModelSpec& model, int degree) const;
  // True when the strategy always keeps only the layer input and recomputes (METP).
  virtual bool always_recomputes() const { return false; }
  // True when every rank runs the layer on all s tokens (tensor parallelism without sequence
  // parallelism): the layer gathers its input, runs its norms, dropouts and residuals on every token
  // alike on every rank, and keeps this rank's s/p slice of its output (layer.hpp).
  virtual bool replicates_tokens() const { return false; }
  // True when the strategy gathers every weight matrix whole over its group before use and
  // reduce-scatters whole gradients (ZeRO-3: zero3.hpp), instead of computing on its shard.
  virtual bool uses_whole_weights() const { return false; }

  // x is the normalised sublayer input [b, s/p, h] ([b, s, h] when the strategy replicates tokens);
  // the result is the sublayer output of the same shape.
  virtual SublayerOutput attention_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                           const Tensor& x) const = 0;
  // Returns d_x, shaped as x; adds this rank's weight-shard gradients into `grads`.
  virtual Tensor attention_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                    SavedActivations& saved, const Tensor& d_y,
                                    LayerWeights& grads) const = 0;
  virtual SublayerOutput mlp_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                     const Tensor& x) const = 0;
  virtual Tensor mlp_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                              SavedActivations& saved, const Tensor& d_y, LayerWeights& grads) const = 0;
};

// One layer of a plan: its strategy and what it recomputes.
struct LayerChoice {
  const Strategy* strategy = nullptr;
  Recompute recompute = Recompute::none;
  friend bool operator==(const LayerChoice&, const LayerChoice&) = default;
  // By the strategy's name, not its address: maps of plans iterate in the same order in every build.
  friend std::strong_ordering operator<=>(const LayerChoice& a, const LayerChoice& b);
};
using Plan = std::vector<LayerChoice>;  // one entry per layer
// Every layer the same: the paper's static plans.
Plan uniform_plan(const Strategy& strategy, int64_t num_layers, Recompute recompute = Recompute::none);
// "megatron_ts" for a uniform plan, else the layers' names joined by ','; ":full" marks recomputation.
std::string plan_name(const Plan& plan);
// Runs of equal layers, for tables: "megatron_ts×6,metp×2" (written "x"); "-" for no plan.
std::string plan_runs_name(const Plan& plan);

// Why `degree` ranks cannot each own whole heads of `model` (p | a and p | a_kv), if they cannot.
std::optional<std::string> whole_heads(const ModelSpec& model, int degree);
// Why `degree` ranks cannot each hold 1/p of the rows of every weight matrix (p | h, p | h_kv, p | f).
std::optional<std::string> layout_rows(const ModelSpec& model, int degree);
// Why a 2-D strategy `name` whose inner groups (`inner_kind`: "Ulysses", "tensor-parallel") hold `inner`
// ranks cannot split `degree` ranks: its ring needs at least two groups; one group is `one_group`.
std::optional<std::string> two_groups(std::string_view name, int inner, std::string_view inner_kind,
                                      std::string_view one_group, int degree);

// Why none of `candidates` can run `model` at `degree` (each distinct reason once, with the strategies
// it stops), and what would: the degrees up to `max_degree` at which one of them runs, and the other
// strategies that run at `degree`. nullopt when one of them can.
std::optional<std::string> none_can_run(const ModelSpec& model, int degree,
                                        const std::vector<const Strategy*>& candidates, int max_degree);

// Every strategy, by name; nullptr for an unknown name.
const Strategy* find_strategy(std::string_view name);
// The 1-D strategies, then the 2-D ones; not every one runs at every degree (Strategy::unsupported).
const std::vector<const Strategy*>& all_strategies();
// Those of all_strategies() that run `model` at `degree`.
std::vector<const Strategy*> strategies_for(const ModelSpec& model, int degree);
// The paper's five: what its selector chooses among and its comparison's static baselines. Megatron
// TP without SP is not one of them: megatron_ts is its sequence-parallel successor, moving the same
// bytes and keeping a p-th of its norm and dropout activations.
const std::vector<const Strategy*>& paper_strategies();
std::string strategy_names();  // "megatron_ts, megatron_cz, ..." for messages

// Downcast of a strategy's own saved state.
template <class Saved>
Saved& saved_as(SavedActivations& saved) {
  auto* typed = dynamic_cast<Saved*>(&saved);
  PARADYSE_CHECK(typed != nullptr, "saved activations of another strategy");
  return *typed;
}

}  // namespace paradyse
