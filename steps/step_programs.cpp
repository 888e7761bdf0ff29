#include "steps/step_programs.hpp"

#include <string>

#include "common/errors.hpp"
#include "strategies/training_step.hpp"

namespace paradyse::steps {
namespace {

std::vector<Program> trace_ranks(int ranks, const std::function<Program(int rank)>& trace,
                                 const TraceProgress& progress) {
  std::vector<Program> programs;
  programs.reserve(static_cast<std::size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    if (progress) progress(rank, ranks);
    programs.push_back(trace(rank));
  }
  return programs;
}

}  // namespace

StepPrograms trace_plan_step(const ModelSpec& model, const hw::ClusterSpec& cluster, const Plan& plan,
                             const EstimateRequest& request_in, const TraceProgress& progress) {
  const EstimateRequest request = checked_request(model, cluster, plan, request_in);
  const int p = request.degree;
  const MicroBatch trained = micro_batch_of(request);
  StepSpec spec;
  spec.model = &model;
  spec.tokens = trained.padded_tokens(p, model.causal);
  if (trained.packed()) spec.documents = trained.padded_documents(p, model.causal);
  spec.batch = request.batch;
  spec.micro_batches = request.micro_batches;
  spec.plan = plan;
  StepPrograms step;
  step.programs = trace_ranks(
      p, [&](int rank) { return trace_training_step(spec, rank, p); }, progress);
  step.static_bytes = static_memory_bytes(model, p);
  step.padded_tokens = spec.tokens;
  step.documents = static_cast<int64_t>(trained.documents.size());
  return step;
}

int grouped_step_job(const GroupedStepSpec& spec) {
  int job = 0;
  if (!spec.rounds.empty())
    for (const GroupWork& group : spec.rounds.front()) job += group.degree;
  return job;
}

StepPrograms trace_grouped_step_programs(const GroupedStepSpec& spec, const hw::ClusterSpec& cluster,
                                         const TraceProgress& progress) {
  PARADYSE_CHECK(spec.model != nullptr, "a grouped step without a model");
  const int job = grouped_step_job(spec);
  check_grouped_step(spec, job);
  if (job > cluster.num_gpus())
    throw InputError("", 0, "groups",
                     "expected at most the " + std::to_string(cluster.num_gpus()) + " GPUs of " +
                         cluster.name + ", got groups of " + std::to_string(job) + " ranks");
  const int node = cluster.gpus_per_node;
  for (const Round& round : spec.rounds)
    for (const GroupWork& group : round)
      if (&cluster.fabric_of(group.first_rank, group.degree) == &cluster.inter_node &&
          (group.first_rank % node != 0 || group.degree % node != 0))
        throw InputError("", 0, "groups",
                         "expected a group wider than a node to start at a node's first GPU and fill whole "
                         "nodes of " +
                             std::to_string(node) + " GPUs, got ranks " + std::to_string(group.first_rank) +
                             " to " + std::to_string(group.first_rank + group.degree - 1));
  ModelSpec model = *spec.model;
  model.num_layers = spec.num_layers;
  StepPrograms step;
  step.programs = trace_ranks(
      job, [&](int rank) { return trace_grouped_step(spec, rank, job); }, progress);
  step.static_bytes = static_memory_bytes(model, spec.shard_degree_of(job), WeightLayout::job);
  return step;
}

}  // namespace paradyse::steps
