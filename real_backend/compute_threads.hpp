// How many threads a process's CPU kernels may use. LibTorch's intra-op pool is one knob; the BLAS it
// calls for float GEMMs may have a pool of its own that at::set_num_threads does not reach: Debian's
// LibTorch calls the system's libblas.so.3, which OpenBLAS provides where it is installed, and
// OpenBLAS starts one thread per core in every process. Ranks that share a machine's cores then run
// cores × ranks busy-waiting threads, and their steps time the contention, not the kernels.
#pragma once

namespace paradyse::real {

// Sets LibTorch's intra-op threads (for the calling thread, as OpenMP does) and, where the process
// has OpenBLAS, its threads (for the whole process).
void set_compute_threads(int threads);

}  // namespace paradyse::real
