#include "real_backend/memory_meter.hpp"

#include <c10/core/CPUAllocator.h>

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

// The inner allocation and its size, freed together.
struct Counted {
  c10::DataPtr inner;
  int64_t bytes;
};

void free_counted(void* context) {
  auto* counted = static_cast<Counted*>(context);
  add(-counted->bytes);
  delete counted;
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr inner = inner_->allocate(n);
    void* data = inner.get();
    const c10::Device device = inner.device();
    add(static_cast<int64_t>(n));
    return {data, new Counted{std::move(inner), static_cast<int64_t>(n)}, &free_counted, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

 private:
  c10::Allocator* inner_;
};

}  // namespace

void MemoryMeter::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CountingAllocator allocator(c10::GetDefaultCPUAllocator());
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

}  // namespace paradyse::real
