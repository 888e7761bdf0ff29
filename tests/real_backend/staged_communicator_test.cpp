// Gloo staging a device's tensors through the host (--gloo-on-device), on CPU tensors: every call
// gives what Gloo gives on the same inputs, and writes the caller's tensors only when waited for.
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <functional>
#include <thread>

#include "real_backend/gloo_communicator.hpp"
#include "real_backend/staged_communicator.hpp"

#include "tests/real_backend/catch_after_torch.hpp"  // last: after LibTorch

namespace paradyse::testing {
namespace {

// What one rank's calls produced, in call order.
using Outputs = std::vector<at::Tensor>;

// Every call of the interface once on 2 ranks, inputs depending on the rank.
Outputs every_call(real::Communicator& c, at::ScalarType type) {
  const int r = c.rank(), p = c.size();
  const auto input = [&](int64_t n) { return (at::arange(n, at::kFloat) + 10 * r).to(type); };
  Outputs out;
  at::Tensor gathered = at::full({p * 6}, -1, type);
  auto gather = c.all_gather(input(6), gathered);
  gather->wait();
  out.push_back(gathered);
  at::Tensor scattered = at::empty({6}, type);
  c.reduce_scatter(input(6 * p), scattered)->wait();
  out.push_back(scattered);
  at::Tensor reduced = input(5);
  c.all_reduce(reduced)->wait();
  out.push_back(reduced);
  at::Tensor exchanged = at::empty({4 * p}, type);
  c.all_to_all(input(4 * p), exchanged)->wait();
  out.push_back(exchanged);
  at::Tensor broadcast = input(3);
  c.broadcast(broadcast, 1)->wait();
  out.push_back(broadcast);
  at::Tensor summed = input(3);
  c.reduce(summed, 0)->wait();
  if (r == 0) out.push_back(summed);
  at::Tensor received = at::empty({7}, type);
  c.send_recv(input(7), (r + 1) % p, received, (r + p - 1) % p)->wait();
  out.push_back(received);
  c.barrier();
  return out;
}

std::vector<Outputs> on_two_ranks(bool staged, at::ScalarType type) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<Outputs> outputs(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      std::unique_ptr<real::Communicator> c =
          real::make_gloo_communicator(store, rank, 2, std::chrono::seconds(30));
      if (staged) c = real::make_staged_communicator(std::move(c), at::kCPU);
      outputs[static_cast<std::size_t>(rank)] = every_call(*c, type);
    });
  for (std::thread& t : threads) t.join();
  return outputs;
}

}  // namespace

TEST_CASE("Gloo staged through the host computes what Gloo computes, every call, fp32 and bf16", "[real]") {
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    INFO(c10::toString(type));
    const std::vector<Outputs> plain = on_two_ranks(false, type), staged = on_two_ranks(true, type);
    for (std::size_t rank = 0; rank < 2; ++rank) {
      REQUIRE(staged[rank].size() == plain[rank].size());
      for (std::size_t call = 0; call < plain[rank].size(); ++call) {
        INFO("rank " << rank << ", call " << call);
        CHECK(staged[rank][call].scalar_type() == type);
        CHECK(at::equal(staged[rank][call], plain[rank][call]));
      }
    }
  }
}

TEST_CASE("Gloo staged through the host writes the caller's output only when waited for", "[real]") {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> threads;
  std::vector<int> before(2), after(2);
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      auto c = real::make_staged_communicator(
          real::make_gloo_communicator(store, rank, 2, std::chrono::seconds(30)), at::kCPU);
      at::Tensor output = at::full({4}, -1.0, at::kFloat);
      auto work = c->all_gather(at::full({2}, static_cast<double>(rank)).to(at::kFloat), output);
      c->barrier();  // the host all-gather has long finished: only the copy back is left
      before[static_cast<std::size_t>(rank)] = at::all(output == -1).item<bool>();
      work->wait();
      after[static_cast<std::size_t>(rank)] = at::equal(output, at::tensor({0.0f, 0.0f, 1.0f, 1.0f}));
    });
  for (std::thread& t : threads) t.join();
  CHECK(before == std::vector<int>{1, 1});
  CHECK(after == std::vector<int>{1, 1});
}

}  // namespace paradyse::testing
