// A sweep's spec: a base compare run and the axes to vary, read from JSON or TOML (by extension).
//
// {"base": {"model": "gpt-8l", "cluster": "dgx-a100", "trace": "github-code-like", "order": "sorted", ...},
//  "axes": {"cluster": ["dgx-a100", "dgx-h100"], "nodes": [1, 2]}}
//
// base keys: model, cluster, nodes, degree, trace, policies, order, seed, limit, sample, engine,
// grid_ratio, global_batch, max_len and over (compare's --max-len and --over), global_batch_tokens and
// micro_batch_tokens (packed training; lengths as integers or text such as "64K"), group_policies and
// shard_group (compare's --group-policies and --shard-group), mode ("compare": the trace; "plan":
// planning only, at plan_lengths, on the analytic model), plan_lengths. Axes: cluster (a preset: GPU
// type and node), nodes, degree, nvlink_scale and nic_scale (factors on the fabrics' bandwidths),
// hbm_gib (GPU memory), oversubscription (of the fat-tree spine between rails),
// nvlink_domain (GPUs per node, each with the preset's per-GPU figures and share of NICs), model,
// trace, global_batch, global_batch_tokens, micro_batch_tokens, shard_group. Points are the cartesian
// product, enumerated in that axis order, the last axis fastest.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluation/compare_job.hpp"

namespace paradyse::evaluation {

struct SweepPoint {
  int index = 0;
  std::string id;                 // "cluster=dgx-h100 nodes=2"
  nlohmann::ordered_json values;  // axis → value
};

struct SweepSpec {
  std::string path;
  nlohmann::ordered_json base;
  std::vector<std::string> axes;  // in enumeration order
  std::vector<SweepPoint> points;
  std::string text;  // the canonical JSON of the spec, to recognise a resumed sweep

  // The compare job of one point; InputError naming the spec field when a value is unusable.
  CompareJob job(const SweepPoint& point) const;
};

// Validates every key, type and value before anything runs. `plan_only` sets base.mode to plan.
SweepSpec load_sweep_spec(const std::string& path, bool plan_only = false);

}  // namespace paradyse::evaluation
