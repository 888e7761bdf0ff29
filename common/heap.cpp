#include "common/heap.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace paradyse {

void keep_freed_heap() {
#if defined(__GLIBC__)
  constexpr int kMiB = 1 << 20;
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // only a free GiB at the top goes back
  mallopt(M_TOP_PAD, 64 * kMiB);
  mallopt(M_MMAP_THRESHOLD, 32 * kMiB);  // glibc's largest; blocks above it are mapped and unmapped
#endif
}

}  // namespace paradyse
