// The CPU allocator of the real backend: it keeps freed blocks for reuse, as PyTorch's CUDA caching
// allocator keeps freed device memory, and counts the bytes of tensor storage in use.
//
// Why it caches: a training process allocates the same temporaries every step. glibc's malloc
// serves each large block by its own mapping and unmaps it on free, so every step page-faults its
// temporaries in again; with mappings off, its heap fragments and still grows by fresh pages now and
// then. Measured on this project's 2-core development machine, one softmax backward over a
// [1, 4, 2048, 2048] bf16 block (16,384–106,000 page faults at about 15 µs each when the memory is
// new): 1.46 s a call with glibc's defaults, 33–750 ms with mappings off and the heap never trimmed
// (0 to 49,152 faults, run to run), 36–42 ms with cached blocks after the first call.
//
// The counts are of tensor storage (every at::empty, every temporary inside an op, every buffer a
// collective allocates), not of the process's resident pages, which include the cached blocks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace paradyse::real {

class HostAllocator {
 public:
  // Installs the allocator as LibTorch's CPU allocator (once per process; later calls do nothing).
  // Storage allocated before it is neither cached nor counted.
  static void install();

  static int64_t in_use_bytes();  // requested bytes of the blocks handed out and not yet freed
  static int64_t peak_bytes();    // the most in_use_bytes() since the last reset_peak()
  static void reset_peak();       // peak := in use
  static int64_t cached_bytes();  // capacity of the freed blocks kept for reuse

  // The capacity of the block that serves a request of `bytes`: rounded up to 512 bytes, as the CUDA
  // caching allocator rounds, so that requests of nearly equal sizes share blocks.
  static std::size_t block_bytes(std::size_t bytes);
  // A cached block serves a request when it is at least the request's block and at most a quarter
  // larger: reuse across sizes without keeping a large block busy for a small tensor.
  static bool block_serves(std::size_t block, std::size_t request_block) {
    return block >= request_block && block - request_block <= request_block / 4;
  }
};

}  // namespace paradyse::real
