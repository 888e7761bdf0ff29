// The programs every rank of a job records for one training step, traced on the tracing backend:
// what the simulator runs (steps::StepSimulator) and what `paradyse export`
// writes as Chakra traces, so that both see the same ops for the same request.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "hw_models/cluster.hpp"
#include "program/program.hpp"
#include "steps/estimate.hpp"
#include "strategies/grouped_step.hpp"

namespace paradyse::steps {

struct StepPrograms {
  std::vector<Program> programs;  // by job rank
  double static_bytes = 0;        // weights, gradients and optimizer states every rank holds from the start
  int64_t padded_tokens = 0;      // one plan's step: the sequence after padding
  int64_t documents = 1;          // one plan's step: documents packed in it
};

// Called before each rank is traced, with how many are done of how many: a large job takes minutes.
using TraceProgress = std::function<void(int traced, int ranks)>;

// One step of `plan` at `request` (checked as checked_request checks it, the tokens padded as the
// strategies require) on request.degree ranks. InputError on an invalid request.
StepPrograms trace_plan_step(const ModelSpec& model, const hw::ClusterSpec& cluster, const Plan& plan,
                             const EstimateRequest& request, const TraceProgress& progress = {});

// The ranks a grouped step's first round covers: its job.
int grouped_step_job(const GroupedStepSpec& spec);

// One grouped step on ranks 0..N−1 of `cluster`, N = grouped_step_job(spec). InputError on an invalid
// step (check_grouped_step), a job larger than the cluster, or a group that spans nodes without
// starting a node and filling whole nodes (NCCL's rings per rail are laid out for those).
StepPrograms trace_grouped_step_programs(const GroupedStepSpec& spec, const hw::ClusterSpec& cluster,
                                         const TraceProgress& progress = {});

}  // namespace paradyse::steps
