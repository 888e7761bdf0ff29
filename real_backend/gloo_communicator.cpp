#include "real_backend/gloo_communicator.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdlib>
#include <functional>
#include <mutex>
#include <vector>

namespace paradyse::real {
namespace {

// Gloo's errors are c10::Errors with a stack trace; what a user needs is the first line.
std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// Gloo in LibTorch 1.13 knows no bfloat16. Moving bytes does not care what they mean, so bf16 travels
// as float16 bits (never computed on); sums (all_reduce, reduce) are taken in float32 and cast back, which
// doubles their bytes on the wire: only the norm gradients, ColossalZ's dK/dV and METP's weight gradients are
// summed so.
at::Tensor as_bytes(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? t.view(at::kHalf) : t;
}

class GlooWork final : public Work {
 public:
  GlooWork(int rank, std::string what, std::vector<c10::intrusive_ptr<c10d::Work>> works,
           std::function<void()> finish = {})
      : rank_(rank), what_(std::move(what)), works_(std::move(works)), finish_(std::move(finish)) {}

  void wait() override {
    try {
      for (auto& work : works_) work->wait();
    } catch (const std::exception& e) {
      throw CommunicationError("rank " + std::to_string(rank_) + ": " + what_ +
                               " failed (a peer died or the group timed out): " + first_line(e.what()));
    }
    if (finish_) finish_();
  }

 private:
  int rank_;
  std::string what_;
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::function<void()> finish_;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout)
      : store_(store), timeout_(timeout), rank_(rank), size_(size) {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    // One Gloo device, hence one event-loop thread, for all of a process's groups (a group of its own
    // per rank set would start one each). A loop that finds a connection busy polls it again at once,
    // so on a machine with fewer cores than threads extra loops spin in epoll_wait against the ranks
    // they wait for: the METP agreement test took 10.7 s with a loop per group, 7.0 s with one.
    static const auto device = c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
    options->devices.push_back(device);
    try {
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
    } catch (const std::exception& e) {
      throw CommunicationError("rank " + std::to_string(rank) + ": could not connect the Gloo group of " +
                               std::to_string(size) + ": " + first_line(e.what()));
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "gloo"; }
  at::Device device() const override { return at::kCPU; }

  std::unique_ptr<Work> all_gather(const at::Tensor& input, at::Tensor& output) override {
    std::vector<std::vector<at::Tensor>> outputs{as_bytes(output).chunk(size_)};
    std::vector<at::Tensor> inputs{as_bytes(input)};
    return start("all_gather", [&] { return Works{group_->allgather(outputs, inputs)}; });
  }

  // Gloo has no reduce-scatter; an all-to-all moves the same (p−1)/p of the buffer per rank, after
  // which each rank sums the p chunks it received.
  std::unique_ptr<Work> reduce_scatter(const at::Tensor& input, at::Tensor& output) override {
    auto received = at::empty_like(input);
    auto work = all_to_all(input, received);
    return start(
        "reduce_scatter", [] { return Works{}; },
        [work = std::shared_ptr<Work>(std::move(work)), received, output, p = size_]() mutable {
          work->wait();
          output.copy_(received.view({p, -1}).to(at::kFloat).sum(0));
        });
  }

  std::unique_ptr<Work> all_reduce(at::Tensor& inout) override {
    std::vector<at::Tensor> tensors{summable(inout)};
    return start(
        "all_reduce", [&] { return Works{group_->allreduce(tensors)}; }, copy_back(tensors[0], inout));
  }

  std::unique_ptr<Work> all_to_all(const at::Tensor& input, at::Tensor& output) override {
    std::vector<int64_t> equal_splits;
    at::Tensor in = as_bytes(input), out = as_bytes(output);
    return start("all_to_all",
                 [&] { return Works{group_->alltoall_base(out, in, equal_splits, equal_splits)}; });
  }

  std::unique_ptr<Work> broadcast(at::Tensor& inout, int root) override {
    std::vector<at::Tensor> tensors{as_bytes(inout)};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return start("broadcast", [&] { return Works{group_->broadcast(tensors, options)}; });
  }

  std::unique_ptr<Work> reduce(at::Tensor& inout, int root) override {
    std::vector<at::Tensor> tensors{summable(inout)};
    c10d::ReduceOptions options;
    options.rootRank = root;
    return start(
        "reduce", [&] { return Works{group_->reduce(tensors, options)}; }, copy_back(tensors[0], inout));
  }

  std::unique_ptr<Work> send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) override {
    // Every rank issues its exchanges in the same order, so a per-pair count is a tag both ends agree on.
    const int tag = next_tag_++;
    std::vector<at::Tensor> sends{as_bytes(send)}, recvs{as_bytes(recv)};
    return start("send_recv", [&] {
      return Works{group_->send(sends, to, tag), group_->recv(recvs, from, tag)};
    });
  }

  void barrier() override {
    start("barrier", [&] { return Works{group_->barrier()}; })->wait();
  }

  std::unique_ptr<Communicator> subgroup(const RankSet& ranks) override {
    check_subgroup(ranks, rank_, size_);
    auto store = c10::make_intrusive<c10d::PrefixStore>(subgroup_prefix(ranks), store_);
    return std::make_unique<GlooCommunicator>(store, (rank_ - ranks.first) / ranks.stride, ranks.size,
                                              timeout_);
  }

 private:
  // Issuing can fail as well as waiting: a peer that died before this op closed its connection.
  template <class Issue>
  std::unique_ptr<Work> start(const char* what, Issue&& issue, std::function<void()> finish = {}) {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    try {
      works = issue();
    } catch (const std::exception& e) {
      throw CommunicationError("rank " + std::to_string(rank_) + ": " + what +
                               " failed (a peer died or the group timed out): " + first_line(e.what()));
    }
    return std::make_unique<GlooWork>(rank_, what, std::move(works), std::move(finish));
  }
  using Works = std::vector<c10::intrusive_ptr<c10d::Work>>;

  static at::Tensor summable(const at::Tensor& t) {
    return t.scalar_type() == at::kBFloat16 ? t.to(at::kFloat) : t;
  }
  // After a sum taken in another type, the result goes back into the caller's buffer.
  static std::function<void()> copy_back(const at::Tensor& summed, const at::Tensor& buffer) {
    if (summed.is_same(buffer)) return {};
    return [summed, buffer]() mutable { buffer.copy_(summed); };
  }

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  int rank_, size_;
  int next_tag_ = 0;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
};

// c10d's flight recorder (LibTorch 2.x) gathers a traceback at every collective a group issues: host
// time a step would pay for a debugging record paradyse does not read. And LibTorch 2.11's recorder
// adds each group to a map before it takes its lock, which ranks running as threads of one process
// (the tests') race on. Off unless the user asks for it (TORCH_FR_BUFFER_SIZE set), before any group.
void leave_flight_recorder_off() {
  static std::once_flag once;
  std::call_once(once, [] { setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/0); });
}

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                     int size, std::chrono::milliseconds timeout) {
  leave_flight_recorder_off();
  return std::make_unique<GlooCommunicator>(store, rank, size, timeout);
}

}  // namespace paradyse::real
