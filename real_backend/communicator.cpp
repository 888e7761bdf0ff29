#include "real_backend/communicator.hpp"

#include <ATen/ATen.h>

#include "common/errors.hpp"

namespace paradyse::real {

std::vector<std::vector<double>> gather_values(Communicator& communicator,
                                               const std::vector<double>& values) {
  const int p = communicator.size();
  const auto n = static_cast<int64_t>(values.size());
  at::Tensor all = at::empty({p * n}, at::kDouble);
  communicator.all_gather(at::tensor(values, at::kDouble), all)->wait();
  const double* data = all.data_ptr<double>();
  std::vector<std::vector<double>> by_value(values.size());
  for (int64_t i = 0; i < n; ++i)
    for (int r = 0; r < p; ++r) by_value[static_cast<std::size_t>(i)].push_back(data[r * n + i]);
  return by_value;
}

void check_subgroup(int first_rank, int size, int rank, int group_size) {
  PARADYSE_CHECK(first_rank >= 0 && size >= 1 && first_rank + size <= group_size && rank >= first_rank &&
                     rank < first_rank + size,
                 "ranks [" + std::to_string(first_rank) + ", " + std::to_string(first_rank + size) +
                     ") as a subgroup of " + std::to_string(group_size) + " asked for by rank " +
                     std::to_string(rank));
}

std::string subgroup_prefix(int first_rank, int size) {
  return "paradyse/group/" + std::to_string(first_rank) + "/" + std::to_string(size) + "/";
}

}  // namespace paradyse::real
