#include "real_backend/held_bytes.hpp"

#include <algorithm>

namespace paradyse::real {

void HeldBytes::hold(const void* storage, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (references_[storage]++ > 0) return;
  current_ += bytes;
  peak_ = std::max(peak_, current_);
}

void HeldBytes::release(const void* storage, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = references_.find(storage);
  if (it == references_.end() || --it->second > 0) return;
  references_.erase(it);
  current_ -= bytes;
}

int64_t HeldBytes::references(const void* storage) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = references_.find(storage);
  return it == references_.end() ? 0 : it->second;
}

}  // namespace paradyse::real
