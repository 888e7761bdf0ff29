// A rank's CPU kernels use the threads it is given, in LibTorch's pool and in OpenBLAS's where the
// process has one (Debian's LibTorch calls the system BLAS, which OpenBLAS provides when installed).
#include <ATen/Parallel.h>
#include <dlfcn.h>

#include "real_backend/compute_threads.hpp"
#include "tests/real_backend/catch_after_torch.hpp"

namespace paradyse::testing {

TEST_CASE("compute threads: LibTorch's pool and OpenBLAS's take the count given", "[real]") {
  using GetThreads = int (*)();
  auto* openblas_threads = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  const int before = at::get_num_threads();
  for (int threads : {1, 2}) {
    real::set_compute_threads(threads);
    CHECK(at::get_num_threads() == threads);
    if (openblas_threads) CHECK(openblas_threads() == threads);
  }
  real::set_compute_threads(before);
}

}  // namespace paradyse::testing
