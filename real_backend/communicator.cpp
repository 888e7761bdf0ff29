#include "real_backend/communicator.hpp"

#include <ATen/ATen.h>

#include "common/errors.hpp"
#include "real_backend/device.hpp"

namespace paradyse::real {

std::vector<std::vector<double>> gather_values(Communicator& communicator,
                                               const std::vector<double>& values) {
  const int p = communicator.size();
  const auto n = static_cast<int64_t>(values.size());
  const at::TensorOptions on_device = at::TensorOptions(at::kDouble).device(communicator.device());
  at::Tensor all = at::empty({p * n}, on_device);
  communicator.all_gather(at::tensor(values, at::kDouble).to(on_device), all)->wait();
  const at::Tensor gathered = on_host(all);
  const double* data = gathered.data_ptr<double>();
  std::vector<std::vector<double>> by_value(values.size());
  for (int64_t i = 0; i < n; ++i)
    for (int r = 0; r < p; ++r) by_value[static_cast<std::size_t>(i)].push_back(data[r * n + i]);
  return by_value;
}

void check_subgroup(const RankSet& ranks, int rank, int group_size) {
  PARADYSE_CHECK(ranks.within(group_size) && ranks.holds(rank),
                 to_string(ranks) + " as a subgroup of " + std::to_string(group_size) +
                     " asked for by rank " + std::to_string(rank));
}

std::string subgroup_prefix(const RankSet& ranks) {
  return "paradyse/group/" + std::to_string(ranks.first) + "/" + std::to_string(ranks.size) + "/" +
         std::to_string(ranks.stride) + "/";
}

}  // namespace paradyse::real
