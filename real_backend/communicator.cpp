#include "real_backend/communicator.hpp"

#include <ATen/ATen.h>

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

}  // namespace paradyse::real
