// A grouped step (strategies/grouped_step.hpp) as a user writes it on a command line (--groups), and
// the ranks its weights are sharded over (--shard-group).
#pragma once

#include <string>

#include "hw_models/cluster.hpp"
#include "strategies/grouped_step.hpp"

namespace paradyse::evaluation {

// Rounds separated by '/', each its groups in rank order separated by ',', each DEGREE:TOKENS, the
// group's ranks and its micro-batch: one sequence (4096, 16K, as parse_length reads them) or documents
// packed into one, joined by '+' (8K+4K+2K). Groups follow each other from rank 0, and every round
// covers the same ranks. Every group trains `plan`, its tokens padded for its degree as the strategies
// require. "4:16K,2:8K,2:4K+4K/8:32K": two rounds on 8 ranks. The spec holds `model` by address.
// InputError naming --groups when the text is not of this form; the step itself is checked when it is
// traced (check_grouped_step).
GroupedStepSpec parse_grouped_step(const std::string& text, const ModelSpec& model, const Plan& plan);

// The ranks each weight is sharded over in a job of `job` GPUs of `cluster`: "job" (all of them, FSDP's
// FULL_SHARD) or "node" (a node's GPUs, each node a replica: HYBRID_SHARD). InputError naming
// --shard-group otherwise.
int parse_shard_group(const std::string& name, const hw::ClusterSpec& cluster, int job);

// The type a grouped step reduces its gradients in (GroupedStepSpec::gradient_reduce_dtype): "bf16" or
// "fp32". InputError naming --gradient-reduce-dtype otherwise.
DType parse_gradient_reduce_dtype(const std::string& name);

}  // namespace paradyse::evaluation
