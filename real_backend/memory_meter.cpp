#include "real_backend/memory_meter.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <atomic>
#include <mutex>

namespace paradyse::real {
namespace {

std::atomic<int64_t> current{0};
std::atomic<int64_t> peak{0};

void add(int64_t bytes) {
  const int64_t now = current.fetch_add(bytes) + bytes;
  int64_t seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
}

// Each block carries its size in a header in front of the data, so that the free knows what to
// subtract with nothing but the data pointer: LibTorch's raw_allocate (used by oneDNN's bf16 GEMMs)
// requires the context to be the data pointer itself.
constexpr std::size_t kHeader = 64;  // keeps the data at alloc_cpu's 64-byte alignment

void free_counted(void* data) {
  char* base = static_cast<char*>(data) - kHeader;
  add(-static_cast<int64_t>(*reinterpret_cast<std::size_t*>(base)));
  c10::free_cpu(base);
}

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const override {
    char* base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    *reinterpret_cast<std::size_t*>(base) = n;
    add(static_cast<int64_t>(n));
    void* data = base + kHeader;
    return {data, data, &free_counted, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_counted; }
};

}  // namespace

void MemoryMeter::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CountingAllocator allocator;
    c10::SetCPUAllocator(&allocator, /*priority=*/100);
  });
}

int64_t MemoryMeter::current_bytes() {
  return current.load();
}
int64_t MemoryMeter::peak_bytes() {
  return peak.load();
}
void MemoryMeter::reset_peak() {
  peak.store(current.load());
}

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

}  // namespace paradyse::real
