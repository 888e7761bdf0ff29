#include "strategies/grouped_step.hpp"

#include <algorithm>
#include <optional>

#include "common/errors.hpp"
#include "program/tracing_backend.hpp"
#include "strategies/micro_batch_pass.hpp"

namespace paradyse {
namespace {

// Rows of each rank's shard of a matrix that belong together (LayerWeights::qkv_groups); one group
// for proj and mlp_out.
std::vector<int64_t> row_groups(const ModelSpec& model, int degree, Tensor LayerWeights::*member) {
  if (member == &LayerWeights::qkv) return LayerWeights::qkv_groups(model, degree);
  if (member == &LayerWeights::mlp_in) return LayerWeights::mlp_in_groups(model, degree);
  const int64_t rows = member == &LayerWeights::proj ? model.hidden : model.ffn_hidden;
  return {rows / degree};
}

// A layer's weights (or gradients) as views of its whole flat tensor.
LayerWeights whole_views(Backend& be, const LayerFlatLayout& layout, const Tensor& flat) {
  LayerWeights w;
  for (const FlatPart& part : layout.parts) {
    int64_t numel = 1;
    for (const int64_t n : part.shape) numel *= n;
    w.*part.member = be.view(be.slice(flat, 0, part.offset, numel), part.shape);
  }
  w.whole = true;
  return w;
}

constexpr Tensor LayerWeights::*kMatrices[] = {&LayerWeights::qkv, &LayerWeights::proj, &LayerWeights::mlp_in,
                                               &LayerWeights::mlp_out};
constexpr Tensor LayerWeights::*kNorms[] = {&LayerWeights::norm1_gamma, &LayerWeights::norm1_beta,
                                            &LayerWeights::norm2_gamma, &LayerWeights::norm2_beta};

// The job's shards, gathered layer by layer (grouped_step.hpp).
class JobShards final : public WeightSource {
 public:
  JobShards(ModelShards& shards, const ModelSpec& model, int num_layers, DType reduce_dtype)
      : shards_(shards), model_(model), num_layers_(num_layers), reduce_dtype_(reduce_dtype) {}

  // A round begins: whether its gathers are prefetched, and whether each layer's gradient shard is summed
  // over its replicas as soon as its backward has added to it (the step's last round, if the shard group
  // trains in it); between rounds, when no gather is in flight.
  void begin_round(bool prefetch, bool sums_in_backward) {
    PARADYSE_CHECK(!next_.valid(), "a prefetched layer gather that was not used");
    prefetch_ = prefetch;
    sums_in_backward_ = sums_in_backward;
    layers_summed_ = layers_summed_ || sums_in_backward;
  }
  // After this rank's last round: every gradient shard not yet summed over its replicas summed (the
  // layers last to first, then the tables, the order of the sums in a backward), and every sum waited for.
  void finish_replica_sums(Backend& be) {
    be.begin_phase(Phase::optimizer, -1);
    if (!layers_summed_)
      for (int layer = num_layers_ - 1; layer >= 0; --layer)
        sum_over_replicas(be, shards_.flat_layer_grads[static_cast<std::size_t>(layer)]);
    if (shards_.head_grad.defined()) sum_over_replicas(be, shards_.head_grad);
    sum_over_replicas(be, shards_.embedding_grad);
    for (Pending& sum : replica_sums_) sum.wait();
    replica_sums_.clear();
  }

  Tensor table(Backend& be, bool head) override {
    return be.shard_all_gather(head ? shards_.head : shards_.embedding, 0);
  }
  void add_table_grad(Backend& be, bool head, const Tensor& d_table) override {
    // A tied table takes two gradients a micro-batch (as the head, then as the embedding), so the tables'
    // sums over the replicas wait for the round's end.
    be.add_(head ? shards_.head_grad : shards_.embedding_grad,
            be.shard_reduce_scatter(
                d_table.dtype() == reduce_dtype_ ? d_table : be.cast(d_table, reduce_dtype_), 0));
  }
  bool tables_sharded_over_group() const override { return false; }  // over the shard group

  const LayerWeights& layer(Backend& be, int layer, const Strategy& strategy, bool backward) override {
    flat_ = gathered(be, {layer, backward});
    whole_ = whole_views(be, layout_, flat_);
    if (takes_whole(be, strategy)) return whole_;
    // This rank's shard of the unified layout at the group's degree.
    shard_ = LayerWeights{};
    for (Tensor LayerWeights::*m : kMatrices) {
      std::vector<Tensor> parts;
      for (const LayerWeights::RowBlock& block :
           LayerWeights::shard_blocks(row_groups(model_, be.degree(), m), be.degree(), be.rank()))
        parts.push_back(be.slice(whole_.*m, 0, block.whole_start, block.rows));
      shard_.*m = parts.size() == 1 ? parts[0] : be.concat(parts, 0);
    }
    for (Tensor LayerWeights::*n : kNorms) shard_.*n = whole_.*n;
    return shard_;
  }

  LayerWeights& layer_grads(Backend& be, int, const Strategy& strategy) override {
    grad_flat_ = be.zeros({layout_.padded(be.shard_degree())}, reduce_dtype_);
    whole_grads_ = whole_views(be, layout_, grad_flat_);
    if (takes_whole(be, strategy) && !strategy.replicates_tokens()) return whole_grads_;
    shard_grads_ = LayerWeights{};
    for (Tensor LayerWeights::*m : kMatrices)
      shard_grads_.*m =
          takes_whole(be, strategy) ? whole_grads_.*m : be.zeros((shard_.*m).shape(), DType::fp32);
    for (Tensor LayerWeights::*n : kNorms)
      if ((whole_grads_.*n).defined())
        shard_grads_.*n =
            strategy.replicates_tokens() ? be.zeros((whole_grads_.*n).shape(), DType::fp32) : whole_grads_.*n;
    return shard_grads_;
  }

  // A round in which this rank trains nothing: it still takes part in every job collective, in
  // forward_backward's order (the embedding table; each layer's weights; the head, and its gradient;
  // each layer's weights and gradient, backward; the embedding's gradient), adding zero gradients.
  void idle_round(Backend& be) {
    const Shape table_shape{padded_vocab(model_, be.shard_degree()), model_.hidden};
    be.begin_phase(Phase::embedding_forward, -1);
    be.label("idle");
    table(be, false);
    for (int layer = 0; layer < num_layers_; ++layer) {
      be.begin_phase(Phase::layer_forward, layer);
      gathered(be, {layer, false});
      be.label("idle");
    }
    be.begin_phase(Phase::head, -1);
    const bool head = !model_.tied_embeddings;
    table(be, head);
    add_table_grad(be, head, be.zeros(table_shape, reduce_dtype_));
    for (int layer = num_layers_ - 1; layer >= 0; --layer) {
      be.begin_phase(Phase::layer_backward, layer);
      gathered(be, {layer, true});
      be.label("idle");
      add_layer_grad(be, layer, be.zeros({layout_.padded(be.shard_degree())}, reduce_dtype_));
    }
    be.begin_phase(Phase::embedding_backward, -1);
    add_table_grad(be, false, be.zeros(table_shape, reduce_dtype_));
  }

  void layer_done(Backend& be, int layer, const Strategy& strategy, bool backward) override {
    flat_ = Tensor();
    whole_ = shard_ = LayerWeights{};
    if (!backward) return;
    be.label("reduce layer gradient");
    if (!takes_whole(be, strategy))
      for (Tensor LayerWeights::*m : kMatrices)
        for (const LayerWeights::RowBlock& block :
             LayerWeights::shard_blocks(row_groups(model_, be.degree(), m), be.degree(), be.rank())) {
          Tensor into = be.slice(whole_grads_.*m, 0, block.whole_start, block.rows);
          be.add_(into, be.slice(shard_grads_.*m, 0, block.shard_start, block.rows));
        }
    if (strategy.replicates_tokens() && be.rank() == 0)  // every rank of the group has the whole sum
      for (Tensor LayerWeights::*n : kNorms)
        if ((shard_grads_.*n).defined()) be.add_(whole_grads_.*n, shard_grads_.*n);
    shard_grads_ = whole_grads_ = LayerWeights{};
    add_layer_grad(be, layer, grad_flat_);
    grad_flat_ = Tensor();
  }

 private:
  // A layer's gather, for its forward or its backward: a micro-batch gathers forward 0 … L−1, then
  // backward L−1 … 0.
  struct Use {
    int layer = 0;
    bool backward = false;
    bool operator==(const Use&) const = default;
  };
  std::optional<Use> after(const Use& use) const {
    if (!use.backward) return use.layer + 1 < num_layers_ ? Use{use.layer + 1, false} : Use{use.layer, true};
    if (use.layer > 0) return Use{use.layer - 1, true};
    return std::nullopt;
  }

  // The whole flat weights of `use`'s layer: the gather started while the layer before computed, or
  // one started now; then, with prefetching, the next use's gather is started, so that it runs on the
  // communication stream under this layer's compute (FSDP's prefetch: one more layer's whole weights
  // held at a time).
  Tensor gathered(Backend& be, const Use& use) {
    Tensor flat;
    if (next_.valid() && next_use_ == use) {
      flat = next_.wait();
    } else {
      PARADYSE_CHECK(!next_.valid(), "a prefetched layer gather that was not used");
      be.label("gather layer");
      flat = be.shard_all_gather(shards_.flat_layers[static_cast<std::size_t>(use.layer)], 0);
    }
    if (const std::optional<Use> next = after(use); prefetch_ && next) {
      be.label("prefetch layer");
      next_ = be.shard_all_gather_async(shards_.flat_layers[static_cast<std::size_t>(next->layer)], 0);
      next_use_ = *next;
      be.label("gather layer");  // what follows takes this layer's shard from its whole weights
    }
    return flat;
  }

  // This rank's shard of the shard group's sum of the layer's whole `gradient`, added into its gradient
  // shard; in the step's last round, that shard is then summed over its replicas.
  void add_layer_grad(Backend& be, int layer, const Tensor& gradient) {
    Tensor& shard = shards_.flat_layer_grads[static_cast<std::size_t>(layer)];
    be.add_(shard, be.shard_reduce_scatter(gradient, 0));
    if (sums_in_backward_) sum_over_replicas(be, shard);
  }
  // Hybrid sharding: every replica accumulates its own ranks' gradients over the step's rounds, and the
  // replicas sum them once, in place in the fp32 gradient shard, waited for before the optimizer (as FSDP2
  // with HSDP and Megatron-FSDP's HSDP all-reduce across replicas at the last micro-batch only): in the
  // step's last round, each layer's sum starts under the backward that follows it; a shard group whose
  // last round comes earlier starts its sums after that round, when nothing else waits on its
  // communication stream, so that a sum waiting there for a later replica holds back none of its own
  // gathers. Nothing under full sharding (one replica).
  void sum_over_replicas(Backend& be, Tensor& shard) {
    be.label("sum over replicas");
    replica_sums_.push_back(be.replica_all_reduce_async(shard));
  }

  // Whole weights serve a strategy that gathers them whole anyway, and any strategy on one rank.
  static bool takes_whole(const Backend& be, const Strategy& strategy) {
    return strategy.uses_whole_weights() || be.degree() == 1;
  }

  ModelShards& shards_;
  const ModelSpec& model_;
  const int num_layers_;
  const DType reduce_dtype_;
  bool prefetch_ = true;
  bool sums_in_backward_ = false;  // this round sums each layer's gradient shard over the replicas
  bool layers_summed_ = false;     // a round has summed the layers' shards over the replicas
  std::vector<Pending> replica_sums_;
  const LayerFlatLayout layout_ = layer_flat_layout(model_);
  Pending next_;  // the prefetched gather of next_use_
  Use next_use_;
  Tensor flat_, grad_flat_;
  LayerWeights whole_, shard_, whole_grads_, shard_grads_;
};

}  // namespace

std::optional<DType> gradient_reduce_dtype_named(std::string_view name) {
  if (name == "bf16") return DType::bf16;
  if (name == "fp32") return DType::fp32;
  return std::nullopt;
}

bool GroupedStepSpec::prefetches(std::size_t round) const {
  return prefetch_gathers && std::find(rounds_without_prefetch.begin(), rounds_without_prefetch.end(),
                                       round) == rounds_without_prefetch.end();
}

bool shard_group_trains(const Round& round, int first_rank, int degree) {
  return std::any_of(round.begin(), round.end(), [&](const GroupWork& group) {
    return !group.idle() && group.first_rank < first_rank + degree &&
           first_rank < group.first_rank + group.degree;
  });
}

const GroupWork& group_of(const Round& round, int rank) {
  for (const GroupWork& group : round)
    if (rank >= group.first_rank && rank < group.first_rank + group.degree) return group;
  PARADYSE_CHECK(false, "no group of the round holds rank " + std::to_string(rank));
  return round.front();
}

void check_grouped_step(const GroupedStepSpec& spec, int job_degree) {
  PARADYSE_CHECK(spec.model != nullptr, "a grouped step without a model");
  const int shard = spec.shard_degree_of(job_degree);
  if (shard < 1 || job_degree % shard != 0)
    throw InputError("", 0, "shard group",
                     "expected a shard group of ranks that divides the job's " + std::to_string(job_degree) +
                         ", got " + std::to_string(shard));
  if (spec.rounds.empty()) throw InputError("", 0, "rounds", "expected at least one round");
  PARADYSE_CHECK(spec.gradient_reduce_dtype == DType::bf16 || spec.gradient_reduce_dtype == DType::fp32,
                 "gradients are reduced in bf16 or fp32");
  for (const std::size_t round : spec.rounds_without_prefetch)
    if (round >= spec.rounds.size())
      throw InputError("", 0, "rounds without prefetch",
                       "expected rounds of the step's " + std::to_string(spec.rounds.size()) +
                           ", got round " + std::to_string(round));
  for (std::size_t r = 0; r < spec.rounds.size(); ++r) {
    const std::string where = "rounds[" + std::to_string(r) + "]";
    int next = 0;
    for (const GroupWork& group : spec.rounds[r]) {
      const std::string field = where + " group at rank " + std::to_string(group.first_rank);
      if (group.first_rank != next || group.degree < 1)
        throw InputError("", 0, field,
                         "expected groups of at least one rank, in rank order from rank 0 with none left "
                         "out; this one should start at rank " +
                             std::to_string(next));
      next += group.degree;
      if (group.idle()) continue;
      const StepSpec& micro = group.micro_batch;
      if (static_cast<int>(micro.plan.size()) != spec.num_layers)
        throw InputError("", 0, field,
                         "expected a plan of " + std::to_string(spec.num_layers) + " layers, got " +
                             std::to_string(micro.plan.size()));
      for (const LayerChoice& choice : micro.plan)
        if (auto why = choice.strategy->unsupported(*spec.model, group.degree))
          throw InputError("", 0, field, std::string(choice.strategy->name()) + ": " + *why);
      step_layout(micro, group.degree);  // throws when the tokens do not fit the group's layout
    }
    if (next != job_degree)
      throw InputError("", 0, where,
                       "expected groups covering the job's " + std::to_string(job_degree) + " ranks, got " +
                           std::to_string(next));
  }
}

Tensor grouped_training_step(Backend& be, const GroupedStepSpec& spec, ModelShards& shards,
                             const std::vector<Tensor>& tokens, const std::vector<Tensor>& targets) {
  const int job = be.job_degree();
  PARADYSE_CHECK(tokens.size() == spec.rounds.size() && targets.size() == spec.rounds.size(),
                 "one tokens and targets tensor per round");
  PARADYSE_CHECK(static_cast<int>(shards.flat_layers.size()) == spec.num_layers &&
                     be.shard_degree() == spec.shard_degree_of(job),
                 "a grouped step runs on shards laid out over its shard group, one per layer");
  StepTotals totals = step_totals(be, spec.clip_grad_norm);
  JobShards weights(shards, *spec.model, spec.num_layers, spec.gradient_reduce_dtype);
  // The rounds this rank runs: those in which its shard group trains something, or every round.
  const int shard_first = be.job_rank() - be.shard_rank();
  std::vector<std::size_t> runs;
  for (std::size_t r = 0; r < spec.rounds.size(); ++r)
    if (!spec.skip_idle_rounds || shard_group_trains(spec.rounds[r], shard_first, be.shard_degree()))
      runs.push_back(r);
  for (const std::size_t r : runs) {
    const GroupWork& group = group_of(spec.rounds[r], be.job_rank());
    weights.begin_round(spec.prefetches(r), spec.sum_over_replicas && r + 1 == spec.rounds.size());
    be.use_group(group.first_rank, group.degree);
    if (group.idle())
      weights.idle_round(be);
    else
      forward_backward(be, group.micro_batch, shards, weights, tokens[r], targets[r], totals.loss);
  }
  be.use_group(0, job);
  if (spec.sum_over_replicas) weights.finish_replica_sums(be);
  std::vector<OptimizerLayer> layers;
  for (int layer = 0; layer < spec.num_layers; ++layer) {
    const auto l = static_cast<std::size_t>(layer);
    layers.push_back({{{&shards.flat_layers[l], &shards.flat_layer_grads[l]}}, {}, false});
  }
  optimizer_step(be, spec.clip_grad_norm, shards, layers, totals);
  return totals.loss;
}

Program trace_grouped_step(const GroupedStepSpec& spec, int job_rank, int job_degree) {
  TracingBackend be(job_rank, job_degree);
  be.use_shard_degree(spec.shard_degree_of(job_degree));
  {
    ModelShards shards(be, *spec.model, spec.num_layers, WeightLayout::job);
    std::vector<Tensor> tokens, targets;
    for (const Round& round : spec.rounds) {
      const GroupWork& group = group_of(round, job_rank);
      const StepSpec& micro = group.micro_batch;
      tokens.push_back(group.idle() ? Tensor()
                                    : be.zeros({micro.batch, micro.tokens / group.degree}, DType::int64));
      targets.push_back(group.idle() ? Tensor()
                                     : be.zeros({micro.batch, micro.tokens / group.degree}, DType::int64));
    }
    grouped_training_step(be, spec, shards, tokens, targets);
  }
  return be.take_program();
}

}  // namespace paradyse
