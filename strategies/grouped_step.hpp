// A step in which the job's ranks form groups that train different micro-batches at the same time,
// each group with its own per-layer plan: short sequences on few ranks, long ones on many (FlexSP,
// ASPLOS'25; ByteScale; Megatron-LM's dynamic context parallelism).
//
// So that any ranks can form a group of any degree without moving parameters, every weight is
// sharded ZeRO-3 style over a shard group (FSDP's unit per layer): a layer's weights are one flat
// tensor (layer_flat_layout), 1/S of it on each of the shard group's S ranks, gathered whole over the
// shard group before the layer's forward and again before its backward; the layer's whole gradient is
// reduce-scattered over the shard group after its backward, in bf16 as the ZeRO-3 strategies here
// reduce theirs (DeepSpeed ZeRO-3 and FSDP reduce in the parameters' dtype by default) or in fp32
// (GroupedStepSpec::gradient_reduce_dtype), and added into the rank's fp32 gradient shard. The shard
// group is the whole job (FSDP's FULL_SHARD), or one node (HYBRID_SHARD: every node holds a replica,
// the gathers stay on NVLink, and the gradient shards are all-reduced over their replicas across the
// nodes once a step, below). These collectives are the same, layer by layer, whatever each group of a
// shard group runs, so the groups of a round in one shard group go through the layers together.
//
// What a group of degree d does with a layer's whole weights:
// - a strategy that gathers whole weights anyway (ZeRO-3: megatron_cz, ulysses_z, colossal_z) uses
//   them as gathered, gathers nothing more, and adds whole gradients;
// - the others (megatron_ts, megatron_tp, metp) take this rank's shard of the unified layout at
//   degree d, cut from the whole weights; their shard gradients are placed back into the whole
//   gradient, zeros elsewhere, before the job's reduce-scatter. So any strategy runs at any degree
//   its heads allow, whatever the job's size.
// Norm weights are in the flat tensor too. A strategy that replicates tokens has each norm gradient
// whole on every rank of its group; the group's first rank alone adds it.
//
// Prefetch: as FSDP does, each layer's gather is started while the layer before it computes (in the
// order a micro-batch uses them: forward 0 … L−1, then backward L−1 … 0), on the one communication
// stream, so that it runs under that layer's compute; only a micro-batch's first gather is exposed.
// The cost: a rank holds two layers' whole weights at a time instead of one. A group's own collectives
// of a layer queue behind the next layer's gather on that stream. A round may go without it (every
// rank of the round alike), where that one layer's weights are what keeps a group's fastest plan out
// of memory.
//
// A step is rounds. In a round every rank of the job is in one group and each group trains one
// micro-batch; the groups may differ from round to round (FlexSP plans each). Gradients accumulate
// over the rounds, and one optimizer step follows the last. A shard group none of whose ranks trains in
// a round skips it: it has no weights to gather for anyone. Under hybrid sharding each replica
// accumulates its own gradient shards over the rounds and the replicas sum them once, in the shard
// group's last round (as FSDP2's HSDP and Megatron-FSDP's do across replicas at the last micro-batch
// only), so that between a step's start and end a node waits for another only in a group that spans
// both.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "program/program.hpp"
#include "strategies/layer_flat_layout.hpp"
#include "strategies/training_step.hpp"

namespace paradyse {

// One group's work in a round: ranks [first_rank, first_rank + degree) of the job train
// `micro_batch` (its tokens, documents, batch and plan; its micro_batches and clip_grad_norm are
// not used).
struct GroupWork {
  int first_rank = 0;
  int degree = 1;
  StepSpec micro_batch;
  // No micro-batch (0 tokens): ranks the round leaves without work, which take part in the job's
  // collectives only (their gathers, and zero gradients to the reduce-scatters).
  bool idle() const { return micro_batch.tokens == 0; }
};
using Round = std::vector<GroupWork>;  // groups in rank order, covering the job

struct GroupedStepSpec {
  const ModelSpec* model = nullptr;
  int num_layers = 0;  // every plan's length
  std::vector<Round> rounds;
  double clip_grad_norm = 1.0;  // as StepSpec's
  int shard_degree = 0;         // ranks in a shard group: 0 for the whole job (Groups::use_shard_degree)
  // Each layer's gather starts while the layer before it computes (grouped_step.hpp's "Prefetch").
  bool prefetch_gathers = true;
  // Rounds (indices into `rounds`) that gather each layer only when they use it: memory relief for a
  // round in which a group's fastest plan fits only without the prefetch's one more layer of weights.
  std::vector<std::size_t> rounds_without_prefetch;
  // A shard group none of whose ranks trains in a round skips it (above); false: its ranks take part in
  // its collectives all the same, as they would for a busy rank of their shard group (what a round costs
  // a rank without work, which the group solver prices as a round's fixed cost).
  bool skip_idle_rounds = true;
  // false: the replicas' gradient shards are left unsummed, as a round in the middle of a step leaves
  // them (what the group solver prices: the sums, like the optimizer, come once a step).
  bool sum_over_replicas = true;
  // The element type in which each layer's whole gradient (and the tables') is summed and
  // reduce-scattered: bf16, the weights' (DeepSpeed ZeRO-3's default, and FSDP's when its mixed precision
  // names no reduce dtype), or fp32 (FSDP with reduce_dtype float32, as Composer's DEFAULT mixed
  // precision and TorchTitan's default set it): twice the bytes on the wire and in the gradient buffer.
  DType gradient_reduce_dtype = DType::bf16;

  int shard_degree_of(int job_degree) const { return shard_degree == 0 ? job_degree : shard_degree; }
  bool prefetches(std::size_t round) const;
};

// The gradient reduction type a name gives (GroupedStepSpec::gradient_reduce_dtype): "bf16" or "fp32";
// none for any other name.
std::optional<DType> gradient_reduce_dtype_named(std::string_view name);

// Throws InputError when the shard group does not divide the job, the rounds' groups do not cover the
// job's `job_degree` ranks exactly, in order, or a plan has another length, a strategy cannot run at its
// group's degree, or a micro-batch's tokens do not fit its group's layout.
void check_grouped_step(const GroupedStepSpec& spec, int job_degree);
// Whether any rank of [first_rank, first_rank + degree) trains a micro-batch in `round`.
bool shard_group_trains(const Round& round, int first_rank, int degree);
// The group of `round` that holds job rank `rank`.
const GroupWork& group_of(const Round& round, int rank);

// Runs one grouped step on `be` (whose parallel group is set per round) with `shards` laid out over
// the shard group (WeightLayout::job, made after be.use_shard_degree(spec.shard_degree_of(job))). tokens[i]
// and targets[i] are this rank's [b, s/d] int64 of its group's micro-batch in round i. Returns this rank's
// summed loss ([1] fp32).
Tensor grouped_training_step(Backend& be, const GroupedStepSpec& spec, ModelShards& shards,
                             const std::vector<Tensor>& tokens, const std::vector<Tensor>& targets);

// The program job rank `job_rank` of `job_degree` records for one grouped step on the tracing backend.
Program trace_grouped_step(const GroupedStepSpec& spec, int job_rank, int job_degree);

}  // namespace paradyse
