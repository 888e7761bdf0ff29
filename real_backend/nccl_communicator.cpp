#include "real_backend/nccl_communicator.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace paradyse::real {
namespace {

constexpr const char* kUniqueIdKey = "paradyse/nccl_id";

// Where the backend's kernels run: LibTorch's current stream on the device, which reads and writes
// every buffer a communication takes.
cudaStream_t compute_stream(int device) {
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
}

[[noreturn]] void fail(int rank, const std::string& call, const std::string& why) {
  throw CommunicationError("rank " + std::to_string(rank) + ": " + call + " failed: " + why);
}

// The caller's thread may have another device current; NCCL, the stream and the events belong to ours.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) noexcept {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ == device) return;
    status_ = cudaSetDevice(device);
    changed_ = status_ == cudaSuccess && previous_ >= 0;
  }
  ~DeviceGuard() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  cudaError_t status() const { return status_; }

 private:
  int previous_ = -1;
  bool changed_ = false;
  cudaError_t status_ = cudaSuccess;
};

class Event {
 public:
  Event() = default;
  ~Event() {
    if (event_) cudaEventDestroy(event_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  // Timing would make every record and wait slower for nothing.
  cudaError_t create() { return cudaEventCreateWithFlags(&event_, cudaEventDisableTiming); }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// What the communicator and its works share: a Work may outlive the communicator that started it and
// still has to poll the NCCL comm for errors.
struct Group {
  int rank, size, device;
  std::chrono::milliseconds timeout;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  Event compute_ready;
  float* barrier_buffer = nullptr;
  bool failed = false;

  Group(int rank_, int size_, int device_, std::chrono::milliseconds timeout_)
      : rank(rank_), size(size_), device(device_), timeout(timeout_) {}
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  ~Group() {
    DeviceGuard guard(device);
    // After an error the peers may never arrive: destroying would wait for them, aborting does not.
    // A non-blocking comm finalizes (flushes its work) before it is destroyed.
    if (comm && !failed && !finalized()) failed = true;
    if (comm) failed ? ncclCommAbort(comm) : ncclCommDestroy(comm);
    if (barrier_buffer) cudaFree(barrier_buffer);
    if (stream) cudaStreamDestroy(stream);
  }

  // Any failure leaves the group unusable for this step: the collective sequence of the ranks has
  // diverged, so the comm is aborted rather than reused.
  void check(cudaError_t status, const char* call) {
    if (status == cudaSuccess) return;
    failed = true;
    fail(rank, call, cudaGetErrorString(status));
  }
  void check(ncclResult_t status, const char* call) {
    if (status == ncclInProgress) status = settle(call);
    if (status == ncclSuccess) return;
    failed = true;
    std::string why = ncclGetErrorString(status);
    if (const char* last = ncclGetLastError(comm); last && *last) why += std::string(" (") + last + ")";
    fail(rank, call, why);
  }
  // The comm is non-blocking, so that a peer that never arrives cannot hold a rank forever: a call may
  // return while NCCL is still at work (ncclInProgress), and the comm is usable once its state settles.
  ncclResult_t settle(const char* call) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) {
      if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) break;
      if (state != ncclInProgress) break;
      if (std::chrono::steady_clock::now() > deadline) {
        failed = true;
        fail(rank, call,
             "timed out after " + std::to_string(timeout.count()) + " ms (a peer died or is stuck)");
      }
      std::this_thread::yield();
    }
    return state;
  }
  bool finalized() noexcept {
    const ncclResult_t status = ncclCommFinalize(comm);
    if (status != ncclInProgress) return status == ncclSuccess;
    try {
      return settle("ncclCommFinalize") == ncclSuccess;
    } catch (const CommunicationError&) {
      return false;
    }
  }
  // A broken peer or transport shows up asynchronously: the call that enqueued the op returned success.
  void check_async() {
    if (!comm) return;
    ncclResult_t async_error = ncclSuccess;
    check(ncclCommGetAsyncError(comm, &async_error), "ncclCommGetAsyncError");
    if (async_error != ncclInProgress) check(async_error, "an earlier NCCL operation");
  }
};

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<Group> group, std::vector<at::Tensor> buffers)
      : group_(std::move(group)), buffers_(std::move(buffers)) {}

  // Without a wait the compute stream could still reuse the buffers' memory while NCCL uses it.
  ~NcclWork() override {
    if (buffers_.empty() || !done_.get()) return;
    DeviceGuard guard(group_->device);
    cudaStreamWaitEvent(compute_stream(group_->device), done_.get(), 0);
  }

  void record() {
    group_->check(done_.create(), "cudaEventCreateWithFlags");
    group_->check(cudaEventRecord(done_.get(), group_->stream), "cudaEventRecord");
  }

  // Every reader of the buffers runs on the compute stream (host copies included), so ordering that
  // stream after the op is enough; the buffers are kept alive until then, as the caching allocator does
  // not know the comm stream uses them.
  void wait() override {
    DeviceGuard guard(group_->device);
    group_->check(guard.status(), "cudaSetDevice");
    group_->check_async();
    group_->check(cudaStreamWaitEvent(compute_stream(group_->device), done_.get(), 0), "cudaStreamWaitEvent");
    buffers_.clear();
  }

  // The host blocks here, so a peer that never arrives must become an error within `timeout`, which a
  // plain cudaEventSynchronize would not give.
  void wait_on_host(const char* what, std::chrono::milliseconds timeout) {
    DeviceGuard guard(group_->device);
    group_->check(guard.status(), "cudaSetDevice");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      group_->check_async();
      const cudaError_t status = cudaEventQuery(done_.get());
      if (status == cudaSuccess) break;
      if (status != cudaErrorNotReady) group_->check(status, "cudaEventQuery");
      if (std::chrono::steady_clock::now() > deadline) {
        group_->failed = true;
        fail(group_->rank, what,
             "timed out after " + std::to_string(timeout.count()) + " ms (a peer died or is stuck)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    buffers_.clear();
  }

 private:
  std::shared_ptr<Group> group_;
  std::vector<at::Tensor> buffers_;
  Event done_;
};

ncclDataType_t nccl_type(at::ScalarType type, int rank) {
  switch (type) {
    case at::kFloat:
      return ncclFloat32;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kHalf:
      return ncclFloat16;
    case at::kDouble:
      return ncclFloat64;
    case at::kLong:
      return ncclInt64;
    case at::kInt:
      return ncclInt32;
    case at::kByte:
      return ncclUint8;
    default:
      fail(rank, "NCCL", std::string("element type ") + c10::toString(type) + " is not supported");
  }
}

size_t count(const at::Tensor& t) {
  return static_cast<size_t>(t.numel());
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank, int size, int device,
                   std::chrono::milliseconds timeout)
      : store_(std::move(store)),
        group_(std::make_shared<Group>(rank, size, device, timeout)),
        timeout_(timeout) {
    if (size < 1 || rank < 0 || rank >= size)
      throw std::invalid_argument("NCCL communicator: rank " + std::to_string(rank) +
                                  " is not in a group of " + std::to_string(size));
    Group& g = *group_;
    DeviceGuard guard(device);
    g.check(guard.status(), "cudaSetDevice");
    const ncclUniqueId id = exchange_unique_id(*store_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    g.check(ncclCommInitRankConfig(&g.comm, size, id, rank, &config), "ncclCommInitRankConfig");
    // Non-blocking: the legacy default stream would otherwise serialize with it implicitly, which the
    // explicit events below already do where it is needed and nowhere else.
    g.check(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    g.check(g.compute_ready.create(), "cudaEventCreateWithFlags");
    g.check(cudaMalloc(reinterpret_cast<void**>(&g.barrier_buffer), sizeof(float)), "cudaMalloc");
    g.check(cudaMemset(g.barrier_buffer, 0, sizeof(float)), "cudaMemset");
  }

  int rank() const override { return group_->rank; }
  int size() const override { return group_->size; }
  std::string name() const override { return "nccl"; }
  at::Device device() const override { return {at::kCUDA, static_cast<c10::DeviceIndex>(group_->device)}; }

  std::unique_ptr<Work> all_gather(const at::Tensor& input, at::Tensor& output) override {
    require("all_gather", input, output, output.numel() == input.numel() * group_->size,
            "output must hold size() times the input's elements");
    return start("all_gather", {input, output}, [&](Group& g) {
      g.check(ncclAllGather(input.data_ptr(), output.data_ptr(), count(input), type(input), g.comm, g.stream),
              "ncclAllGather");
    });
  }

  std::unique_ptr<Work> reduce_scatter(const at::Tensor& input, at::Tensor& output) override {
    require("reduce_scatter", input, output, input.numel() == output.numel() * group_->size,
            "input must hold size() times the output's elements");
    return start("reduce_scatter", {input, output}, [&](Group& g) {
      g.check(ncclReduceScatter(input.data_ptr(), output.data_ptr(), count(output), type(input), ncclSum,
                                g.comm, g.stream),
              "ncclReduceScatter");
    });
  }

  std::unique_ptr<Work> all_reduce(at::Tensor& inout) override {
    require("all_reduce", inout);
    return start("all_reduce", {inout}, [&](Group& g) {
      g.check(ncclAllReduce(inout.data_ptr(), inout.data_ptr(), count(inout), type(inout), ncclSum, g.comm,
                            g.stream),
              "ncclAllReduce");
    });
  }

  // NCCL has no all-to-all collective; p grouped send/recv pairs are how torch builds it too.
  std::unique_ptr<Work> all_to_all(const at::Tensor& input, at::Tensor& output) override {
    const int p = group_->size;
    require("all_to_all", input, output, input.numel() == output.numel() && input.numel() % p == 0,
            "input and output must have the same number of elements, a multiple of size()");
    const size_t chunk = count(input) / static_cast<size_t>(p);
    const size_t chunk_bytes = chunk * static_cast<size_t>(input.element_size());
    return start("all_to_all", {input, output}, [&](Group& g) {
      const auto* send = static_cast<const char*>(input.data_ptr());
      auto* recv = static_cast<char*>(output.data_ptr());
      grouped(g, [&] {
        for (int j = 0; j < p; ++j) {
          const size_t offset = static_cast<size_t>(j) * chunk_bytes;
          g.check(ncclSend(send + offset, chunk, type(input), j, g.comm, g.stream), "ncclSend");
          g.check(ncclRecv(recv + offset, chunk, type(output), j, g.comm, g.stream), "ncclRecv");
        }
      });
    });
  }

  std::unique_ptr<Work> broadcast(at::Tensor& inout, int root) override {
    require("broadcast", inout);
    require_rank("broadcast", "root", root);
    return start("broadcast", {inout}, [&](Group& g) {
      g.check(ncclBroadcast(inout.data_ptr(), inout.data_ptr(), count(inout), type(inout), root, g.comm,
                            g.stream),
              "ncclBroadcast");
    });
  }

  std::unique_ptr<Work> reduce(at::Tensor& inout, int root) override {
    require("reduce", inout);
    require_rank("reduce", "root", root);
    return start("reduce", {inout}, [&](Group& g) {
      g.check(ncclReduce(inout.data_ptr(), inout.data_ptr(), count(inout), type(inout), ncclSum, root, g.comm,
                         g.stream),
              "ncclReduce");
    });
  }

  std::unique_ptr<Work> send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) override {
    require("send_recv", send, recv, send.numel() == recv.numel(),
            "send and recv must have the same number of elements");
    require_rank("send_recv", "to", to);
    require_rank("send_recv", "from", from);
    return start("send_recv", {send, recv}, [&](Group& g) {
      // Grouped, so that two ranks sending to each other do not both wait in ncclSend.
      grouped(g, [&] {
        g.check(ncclSend(send.data_ptr(), count(send), type(send), to, g.comm, g.stream), "ncclSend");
        g.check(ncclRecv(recv.data_ptr(), count(recv), type(recv), from, g.comm, g.stream), "ncclRecv");
      });
    });
  }

  void barrier() override {
    start("barrier", {}, [](Group& g) {
      g.check(ncclAllReduce(g.barrier_buffer, g.barrier_buffer, 1, ncclFloat32, ncclSum, g.comm, g.stream),
              "ncclAllReduce");
    })->wait_on_host("barrier", timeout_);
  }

  std::unique_ptr<Communicator> subgroup(const RankSet& ranks) override {
    const Group& g = *group_;
    check_subgroup(ranks, g.rank, g.size);
    auto store = c10::make_intrusive<c10d::PrefixStore>(subgroup_prefix(ranks), store_);
    return std::make_unique<NcclCommunicator>(store, (g.rank - ranks.first) / ranks.stride, ranks.size,
                                              g.device, timeout_);
  }

 private:
  ncclUniqueId exchange_unique_id(c10d::Store& store) {
    Group& g = *group_;
    ncclUniqueId id;
    try {
      if (g.rank == 0) {
        g.check(ncclGetUniqueId(&id), "ncclGetUniqueId");
        const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
        store.set(kUniqueIdKey, std::vector<uint8_t>(bytes, bytes + sizeof id));
      } else {
        store.wait({kUniqueIdKey}, timeout_);
        const std::vector<uint8_t> bytes = store.get(kUniqueIdKey);
        if (bytes.size() != sizeof id)
          fail(g.rank, "reading the NCCL id",
               "the store holds " + std::to_string(bytes.size()) + " bytes under " + kUniqueIdKey + ", not " +
                   std::to_string(sizeof id));
        std::memcpy(&id, bytes.data(), sizeof id);
      }
    } catch (const CommunicationError&) {
      throw;
    } catch (const std::exception& e) {
      // c10d's errors carry a stack trace; the first line says what went wrong.
      const std::string what = e.what();
      fail(g.rank, "exchanging the NCCL id through the store", what.substr(0, what.find('\n')));
    }
    return id;
  }

  ncclDataType_t type(const at::Tensor& t) const { return nccl_type(t.scalar_type(), group_->rank); }

  void require(const char* op, const at::Tensor& t) const {
    const auto bad = [&](const std::string& why) {
      return std::invalid_argument(std::string("NCCL ") + op + " on rank " + std::to_string(group_->rank) +
                                   ": " + why);
    };
    if (!t.is_cuda()) throw bad("needs CUDA tensors, got one on " + t.device().str());
    if (t.get_device() != group_->device)
      throw bad("the tensor is on " + t.device().str() +
                ", the communicator on cuda:" + std::to_string(group_->device));
    if (!t.is_contiguous()) throw bad("needs contiguous tensors");
  }
  void require(const char* op, const at::Tensor& a, const at::Tensor& b, bool sizes_match,
               const char* sizes) const {
    require(op, a);
    require(op, b);
    if (a.scalar_type() != b.scalar_type())
      throw std::invalid_argument(std::string("NCCL ") + op +
                                  ": both tensors must have the same element type");
    if (!sizes_match) throw std::invalid_argument(std::string("NCCL ") + op + ": " + sizes);
  }
  void require_rank(const char* op, const char* role, int peer) const {
    if (peer < 0 || peer >= group_->size)
      throw std::invalid_argument(std::string("NCCL ") + op + ": " + role + " " + std::to_string(peer) +
                                  " is not a rank of a group of " + std::to_string(group_->size));
  }

  // An error inside a group must still close it, or NCCL would hold every later call in that group.
  template <class Calls>
  static void grouped(Group& g, Calls&& calls) {
    g.check(ncclGroupStart(), "ncclGroupStart");
    try {
      calls();
    } catch (...) {
      ncclGroupEnd();
      throw;
    }
    g.check(ncclGroupEnd(), "ncclGroupEnd");
  }

  template <class Issue>
  std::unique_ptr<NcclWork> start(const char* what, std::vector<at::Tensor> buffers, Issue&& issue) {
    Group& g = *group_;
    DeviceGuard guard(g.device);
    g.check(guard.status(), "cudaSetDevice");
    if (g.failed) fail(g.rank, what, "an earlier operation of this group failed");
    g.check_async();
    // The inputs are written by kernels on the compute stream, which the comm stream does not follow
    // by itself.
    g.check(cudaEventRecord(g.compute_ready.get(), compute_stream(g.device)), "cudaEventRecord");
    g.check(cudaStreamWaitEvent(g.stream, g.compute_ready.get(), 0), "cudaStreamWaitEvent");
    issue(g);
    auto work = std::make_unique<NcclWork>(group_, std::move(buffers));
    work->record();
    return work;
  }

  c10::intrusive_ptr<c10d::Store> store_;
  std::shared_ptr<Group> group_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                     int size, int cuda_device,
                                                     std::chrono::milliseconds timeout) {
  return std::make_unique<NcclCommunicator>(store, rank, size, cuda_device, timeout);
}

}  // namespace paradyse::real
