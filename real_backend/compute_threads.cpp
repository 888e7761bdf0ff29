#include "real_backend/compute_threads.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>

namespace paradyse::real {

void set_compute_threads(int threads) {
  at::set_num_threads(threads);
  // Looked up, not linked: a LibTorch with its own BLAS (pip's, with MKL) or a reference libblas.so.3
  // has no such function, and then there is no other pool to size.
  using SetThreads = void (*)(int);
  if (auto* openblas = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    openblas(threads);
}

}  // namespace paradyse::real
