#include "program/backend.hpp"

#include <string>

namespace paradyse {

void check_shard_degree(int degree, int job_degree) {
  PARADYSE_CHECK(
      degree >= 1 && job_degree % degree == 0,
      "a shard group of " + std::to_string(degree) + " ranks in a job of " + std::to_string(job_degree));
}

std::string to_string(const RankSet& ranks) {
  return "ranks " + std::to_string(ranks.first) + " + " + std::to_string(ranks.stride) + "·i for i < " +
         std::to_string(ranks.size);
}

RankSet Groups::ranks_of(CommGroup group) const {
  const int shard = shard_degree();
  switch (group) {
    case CommGroup::parallel:
      return parallel_ranks();
    case CommGroup::shard:
      return {job_rank() - shard_rank(), shard, 1};
    case CommGroup::replica:
      return {shard_rank(), job_degree() / shard, shard};
    case CommGroup::job:
      return {0, job_degree(), 1};
  }
  return {};
}

GroupSplit split_group(const Groups& be, int inner_size) {
  PARADYSE_CHECK(inner_size >= 1 && be.degree() % inner_size == 0,
                 "groups of " + std::to_string(inner_size) + " in a group of " + std::to_string(be.degree()));
  const RankSet group = be.parallel_ranks();
  const int rank = be.rank();
  return {{group.rank(rank / inner_size * inner_size), inner_size, group.stride},
          {group.rank(rank % inner_size), be.degree() / inner_size, inner_size * group.stride}};
}

GroupScope::GroupScope(Groups& be, const RankSet& ranks) : be_(be), outer_(be.parallel_ranks()) {
  be_.set_parallel_ranks(ranks);
}

GroupScope::~GroupScope() {
  be_.set_parallel_ranks(outer_);
}

}  // namespace paradyse
