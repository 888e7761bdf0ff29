#include "real_backend/host_allocator.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

namespace paradyse::real {
namespace {

std::atomic<int64_t> bytes_in_use{0};
std::atomic<int64_t> peak_bytes_in_use{0};

void count(int64_t bytes) {
  const int64_t now = bytes_in_use.fetch_add(bytes) + bytes;
  int64_t seen = peak_bytes_in_use.load();
  while (now > seen && !peak_bytes_in_use.compare_exchange_weak(seen, now)) {
  }
}

// Each block carries a header in front of the data, so that the free knows the block's capacity and
// the size it was requested at from the data pointer alone: LibTorch's raw_allocate (used by oneDNN's
// bf16 GEMMs) requires the context to be the data pointer itself.
struct Header {
  std::size_t capacity;   // bytes after the header
  std::size_t requested;  // bytes counted in use
};
constexpr std::size_t kHeaderBytes = 64;  // keeps the data at alloc_cpu's 64-byte alignment
static_assert(sizeof(Header) <= kHeaderBytes);

// Freed blocks by capacity (the header's start), shared by all threads: Gloo's threads free what
// the backend's thread allocated and the other way round.
std::mutex cache_mutex;
std::multimap<std::size_t, char*> cache;
std::atomic<int64_t> cached{0};

void free_block(void* data) {
  char* base = static_cast<char*>(data) - kHeaderBytes;
  const Header header = *reinterpret_cast<const Header*>(base);
  count(-static_cast<int64_t>(header.requested));
  const std::lock_guard<std::mutex> lock(cache_mutex);
  cache.emplace(header.capacity, base);
  cached += static_cast<int64_t>(header.capacity);
}

char* cached_block(std::size_t capacity) {
  const std::lock_guard<std::mutex> lock(cache_mutex);
  const auto it = cache.lower_bound(capacity);
  if (it == cache.end() || !HostAllocator::block_serves(it->first, capacity)) return nullptr;
  char* base = it->second;
  cached -= static_cast<int64_t>(it->first);
  cache.erase(it);
  return base;
}

c10::DataPtr allocate_block(size_t bytes) {
  const std::size_t capacity = HostAllocator::block_bytes(bytes);
  char* base = cached_block(capacity);
  if (base == nullptr) {
    base = static_cast<char*>(c10::alloc_cpu(capacity + kHeaderBytes));
    reinterpret_cast<Header*>(base)->capacity = capacity;
  }
  reinterpret_cast<Header*>(base)->requested = bytes;
  count(static_cast<int64_t>(bytes));
  void* data = base + kHeaderBytes;
  return {data, data, &free_block, c10::Device(c10::DeviceType::CPU)};
}

class CachingAllocator final : public c10::Allocator {
 public:
  // LibTorch 2.3 made allocate() non-const and added copy_data() (what Allocator::clone copies with).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  c10::DataPtr allocate(size_t bytes) override {
    return allocate_block(bytes);
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t bytes) const override {
    return allocate_block(bytes);
  }
#endif
  c10::DeleterFnPtr raw_deleter() const override {
    return &free_block;
  }
};

}  // namespace

void HostAllocator::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CachingAllocator allocator;
    c10::SetCPUAllocator(&allocator, /*priority=*/100);
  });
}

std::size_t HostAllocator::block_bytes(std::size_t bytes) {
  constexpr std::size_t kRoundBytes = 512;
  return (std::max<std::size_t>(bytes, 1) + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
}

int64_t HostAllocator::in_use_bytes() {
  return bytes_in_use.load();
}
int64_t HostAllocator::peak_bytes() {
  return peak_bytes_in_use.load();
}
void HostAllocator::reset_peak() {
  peak_bytes_in_use.store(bytes_in_use.load());
}
int64_t HostAllocator::cached_bytes() {
  return cached.load();
}

}  // namespace paradyse::real
