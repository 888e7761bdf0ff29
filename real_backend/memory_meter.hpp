// Bytes of tensor storage this process holds, measured where LibTorch allocates it: a counting
// wrapper around the CPU allocator (every at::empty, every temporary inside an op, every buffer a
// collective allocates). On GPU the same figures come from the CUDA caching allocator's statistics.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

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

// The bytes one backend holds: the storage behind its tensor handles (views counted once), its
// optimizer state and the buffers of its communications in flight. It is the figure the simulator
// predicts (what the strategies allocate), free of the temporaries inside ops and of what other
// threads (Gloo's) allocate, which MemoryMeter also counts.
class HeldBytes {
 public:
  void hold(const void* storage, int64_t bytes);     // one more reference to `storage`
  void release(const void* storage, int64_t bytes);  // one fewer; freed at zero
  int64_t current() const { return current_; }
  int64_t peak() const { return peak_; }
  void reset_peak() { peak_ = current_; }

 private:
  std::mutex mutex_;
  std::unordered_map<const void*, int64_t> references_;
  int64_t current_ = 0, peak_ = 0;
};

}  // namespace paradyse::real
