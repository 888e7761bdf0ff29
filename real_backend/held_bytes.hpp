// The bytes one backend holds: the storage behind its tensor handles (views counted once), its
// optimizer state and the buffers of its communications in flight. It is the figure the simulator
// predicts (what the strategies allocate), free of the temporaries inside ops and of what other
// threads (Gloo's) allocate, which HostAllocator also counts.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace paradyse::real {

class HeldBytes {
 public:
  void hold(const void* storage, int64_t bytes);     // one more reference to `storage`
  void release(const void* storage, int64_t bytes);  // one fewer; freed at zero
  int64_t references(const void* storage);           // holders of `storage` now
  int64_t current() const { return current_; }
  int64_t peak() const { return peak_; }
  void reset_peak() { peak_ = current_; }

 private:
  std::mutex mutex_;
  std::unordered_map<const void*, int64_t> references_;
  int64_t current_ = 0, peak_ = 0;
};

}  // namespace paradyse::real
