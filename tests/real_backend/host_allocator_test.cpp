// real_backend/host_allocator.cpp: freed blocks are kept and handed out again to requests of their
// size, never to much smaller ones; the in-use count follows the requested bytes.
#include "real_backend/host_allocator.hpp"

#include <ATen/ATen.h>

#include "tests/real_backend/catch_after_torch.hpp"  // last: after LibTorch

namespace paradyse::testing {
namespace {

using real::HostAllocator;

TEST_CASE("host allocator: a freed block serves the next request of its size", "[real]") {
  HostAllocator::install();
  const int64_t elements = 3 * 1024 * 1024 + 7;  // 12 MiB + 28 bytes of fp32: rounded up to 512 bytes
  const auto requested = static_cast<int64_t>(elements * sizeof(float));
  const auto block = static_cast<int64_t>(HostAllocator::block_bytes(static_cast<std::size_t>(requested)));
  CHECK(block % 512 == 0);
  CHECK(block - requested < 512);

  const int64_t in_use_before = HostAllocator::in_use_bytes();
  at::Tensor first = at::empty({elements});
  CHECK(HostAllocator::in_use_bytes() - in_use_before == requested);
  const void* address = first.data_ptr();

  const int64_t cached_before = HostAllocator::cached_bytes();
  first = at::Tensor();
  CHECK(HostAllocator::in_use_bytes() == in_use_before);
  CHECK(HostAllocator::cached_bytes() - cached_before == block);

  SECTION("the same size gets the same block back") {
    const at::Tensor again = at::empty({elements});
    CHECK(again.data_ptr() == address);
    CHECK(HostAllocator::cached_bytes() == cached_before);
  }
  SECTION("a request within a quarter below the block reuses it") {
    const at::Tensor smaller = at::empty({elements * 9 / 10});
    CHECK(smaller.data_ptr() == address);
  }
  SECTION("a request far below the block does not take it") {
    const at::Tensor half = at::empty({elements / 2});
    CHECK(half.data_ptr() != address);
    CHECK(HostAllocator::cached_bytes() - cached_before == block);
  }
}

TEST_CASE("host allocator: the peak is the most in use since the last reset", "[real]") {
  HostAllocator::install();
  HostAllocator::reset_peak();
  const int64_t base = HostAllocator::in_use_bytes();
  { const at::Tensor big = at::empty({1 << 20}); }
  const at::Tensor small = at::empty({1 << 10});
  CHECK(HostAllocator::peak_bytes() - base == (int64_t{1} << 20) * 4);
  HostAllocator::reset_peak();
  CHECK(HostAllocator::peak_bytes() - base == (int64_t{1} << 10) * 4);
}

TEST_CASE("host allocator: blocks round to 512 bytes and serve requests up to a quarter smaller", "[real]") {
  CHECK(HostAllocator::block_bytes(0) == 512);
  CHECK(HostAllocator::block_bytes(512) == 512);
  CHECK(HostAllocator::block_bytes(513) == 1024);
  CHECK(HostAllocator::block_serves(1280, 1024));
  CHECK_FALSE(HostAllocator::block_serves(1536, 1024));
  CHECK_FALSE(HostAllocator::block_serves(512, 1024));
}

}  // namespace
}  // namespace paradyse::testing
