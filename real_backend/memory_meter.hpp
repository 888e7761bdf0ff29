// Bytes of tensor storage this process holds, measured where LibTorch allocates it: a counting
// wrapper around the CPU allocator (every at::empty, every temporary inside an op, every buffer a
// collective allocates). On GPU the same figures come from the CUDA caching allocator's statistics.
#pragma once

#include <cstdint>

namespace paradyse::real {

class MemoryMeter {
 public:
  // Installs the counting CPU allocator (once per process; later calls do nothing). Storage
  // allocated before it is not counted when freed either.
  static void install();
  static int64_t current_bytes();
  static int64_t peak_bytes();
  static void reset_peak();  // peak := current
};

}  // namespace paradyse::real
