#include "selector/group_costs.hpp"

#include <iomanip>
#include <sstream>

#include "common/errors.hpp"
#include "common/units.hpp"
#include "selector/longest_length.hpp"

namespace paradyse::selector {

namespace {
std::string gib(double bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << bytes / kGiB << " GiB";
  return out.str();
}
}  // namespace

struct GroupCosts::AtDegree {
  AtDegree(const ModelSpec& model, const hw::ClusterSpec& cluster, int degree, const std::string& policy_name)
      : source(model, cluster, degree), policy(make_policy(policy_name, source)) {}
  AnalyticCostSource source;
  std::unique_ptr<Policy> policy;
  int64_t capacity_tokens = 0;
  std::unordered_map<int64_t, double> seconds;  // by length; kNoFit where it does not fit
};

GroupCosts::GroupCosts(const ModelSpec& model, const hw::ClusterSpec& cluster, int job,
                       const std::string& policy, int64_t max_tokens)
    : job_(job) {
  if (job < 1 || (job & (job - 1)) != 0 || job > cluster.num_gpus())
    throw InputError("", 0, "job",
                     "expected a power of two of GPUs up to the " + std::to_string(cluster.num_gpus()) +
                         " of " + cluster.name + ", got " + std::to_string(job));
  // Every GPU of the job holds 1/job of the weights, gradients and optimizer state (grouped_step.hpp).
  costmodel::MemoryBreakdown sharded;
  costmodel::static_memory(model, job, sharded, WeightLayout::job);
  const double static_bytes =
      sharded.weights_bytes + sharded.gradients_bytes + sharded.optimizer_states_bytes;
  if (static_bytes > cluster.tensor_capacity_bytes())
    throw InputError("", 0, "job",
                     model.name + "'s weights, gradients and optimizer state take " + gib(static_bytes) +
                         " a GPU sharded over " + std::to_string(job) + " GPUs, more than the " +
                         gib(cluster.tensor_capacity_bytes()) + " a GPU of " + cluster.name +
                         " holds: shard over more GPUs");
  for (int degree = 1; degree <= job; degree *= 2) {
    auto at = std::make_unique<AtDegree>(model, cluster, degree, policy);
    at->capacity_tokens = longest_length(*at->policy, max_tokens).tokens;
    if (at->capacity_tokens == 0) continue;  // the policy trains nothing on this many ranks
    degrees_.push_back(degree);
    at_degree_.push_back(std::move(at));
  }
  if (degrees_.empty())
    throw InputError("", 0, "policy",
                     policy + " trains no sequence on any group of up to " + std::to_string(job) +
                         " GPUs of " + cluster.name);
}

GroupCosts::~GroupCosts() = default;

GroupProblem GroupCosts::problem(const std::vector<int64_t>& tokens) {
  GroupProblem problem;
  problem.job = job_;
  problem.degrees = degrees_;
  problem.tokens = tokens;
  for (const auto& at : at_degree_) problem.capacity_tokens.push_back(at->capacity_tokens);
  for (const int64_t length : tokens) {
    std::vector<double>& row = problem.seconds.emplace_back();
    for (const auto& at : at_degree_) {
      auto [it, added] = at->seconds.try_emplace(length, GroupProblem::kNoFit);
      if (added && length <= at->capacity_tokens) {
        const Decision decision = at->policy->decide(length);
        if (decision.fits) it->second = decision.predicted_s;
      }
      row.push_back(it->second);
    }
  }
  return problem;
}

}  // namespace paradyse::selector
