// The group solver's problem for a global batch (group_solver.hpp), priced by a policy at each
// degree: a sequence's time on a group of d ranks is what the policy decides for it on d ranks (one
// strategy everywhere for `static:ulysses_z`, FlexSP's; the exact per-layer plan for `optimal`), and a
// degree's capacity the longest sequence the policy trains there. Each group is priced as a job of
// its own degree (the analytic model of a one-group step): weights sharded over the group, not the
// job, which overstates a small group's static memory and leaves out the job's per-layer gathers.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "selector/group_solver.hpp"
#include "selector/policy.hpp"

namespace paradyse::selector {

class GroupCosts {
 public:
  // Degrees: the powers of two up to `job` at which the policy can run the model. Throws InputError
  // when `job` is not a power of two or exceeds the cluster, or no degree can run the model.
  GroupCosts(const ModelSpec& model, const hw::ClusterSpec& cluster, int job, const std::string& policy,
             int64_t max_tokens);
  ~GroupCosts();

  int job() const { return job_; }
  const std::vector<int>& degrees() const { return degrees_; }
  // The problem of one global batch of sequences of these lengths; times cached per length.
  GroupProblem problem(const std::vector<int64_t>& tokens);

 private:
  struct AtDegree;
  int job_;
  std::vector<int> degrees_;
  std::vector<std::unique_ptr<AtDegree>> at_degree_;
};

}  // namespace paradyse::selector
