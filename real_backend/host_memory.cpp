#include "real_backend/host_memory.hpp"

#include <malloc.h>

#include <climits>
#include <mutex>

namespace paradyse::real {

void keep_freed_host_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
    // No block is served by its own mapping (those go back to the kernel on free), and the heap is
    // never trimmed: freed blocks are reused by the next step's allocations of the same sizes.
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
  });
}

}  // namespace paradyse::real
