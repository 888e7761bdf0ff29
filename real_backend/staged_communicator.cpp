#include "real_backend/staged_communicator.hpp"

#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace paradyse::real {
namespace {

// A host buffer for a tensor of the device: pinned on a GPU, so that the copy back into the device
// is queued on the stream instead of holding the host (the caching host allocator keeps the block
// until that copy has run).
at::Tensor host_buffer(const at::Tensor& like, const at::Device& device) {
  return at::empty(like.sizes(), like.options().device(at::kCPU).pinned_memory(device.is_cuda()));
}

// The device tensor's values in a host buffer: a blocking copy, so it reads what the stream wrote.
at::Tensor staged(const at::Tensor& t, const at::Device& device) {
  at::Tensor host = host_buffer(t, device);
  host.copy_(t);
  return host;
}

class StagedWork final : public Work {
 public:
  // `results`: (host buffer, device tensor) pairs copied back once the host work is done; `inputs`:
  // the host copies the work reads, kept alive until then.
  StagedWork(std::unique_ptr<Work> host_work, std::vector<std::pair<at::Tensor, at::Tensor>> results,
             std::vector<at::Tensor> inputs)
      : host_work_(std::move(host_work)), results_(std::move(results)), inputs_(std::move(inputs)) {}

  void wait() override {
    host_work_->wait();
    for (auto& [host, device] : results_) device.copy_(host, /*non_blocking=*/true);
    results_.clear();
    inputs_.clear();
  }

 private:
  std::unique_ptr<Work> host_work_;
  std::vector<std::pair<at::Tensor, at::Tensor>> results_;
  std::vector<at::Tensor> inputs_;
};

class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(std::unique_ptr<Communicator> host, const at::Device& device)
      : host_(std::move(host)), device_(device) {}

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string name() const override { return host_->name(); }
  at::Device device() const override { return device_; }

  std::unique_ptr<Work> all_gather(const at::Tensor& input, at::Tensor& output) override {
    at::Tensor in = staged(input, device_), out = host_buffer(output, device_);
    return finish(host_->all_gather(in, out), {{out, output}}, {in});
  }
  std::unique_ptr<Work> reduce_scatter(const at::Tensor& input, at::Tensor& output) override {
    at::Tensor in = staged(input, device_), out = host_buffer(output, device_);
    return finish(host_->reduce_scatter(in, out), {{out, output}}, {in});
  }
  std::unique_ptr<Work> all_reduce(at::Tensor& inout) override {
    at::Tensor buffer = staged(inout, device_);
    return finish(host_->all_reduce(buffer), {{buffer, inout}}, {});
  }
  std::unique_ptr<Work> all_to_all(const at::Tensor& input, at::Tensor& output) override {
    at::Tensor in = staged(input, device_), out = host_buffer(output, device_);
    return finish(host_->all_to_all(in, out), {{out, output}}, {in});
  }
  std::unique_ptr<Work> broadcast(at::Tensor& inout, int root) override {
    at::Tensor buffer = staged(inout, device_);
    return finish(host_->broadcast(buffer, root), {{buffer, inout}}, {});
  }
  std::unique_ptr<Work> reduce(at::Tensor& inout, int root) override {
    at::Tensor buffer = staged(inout, device_);
    return finish(host_->reduce(buffer, root), {{buffer, inout}}, {});
  }
  std::unique_ptr<Work> send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) override {
    at::Tensor in = staged(send, device_), out = host_buffer(recv, device_);
    return finish(host_->send_recv(in, to, out, from), {{out, recv}}, {in});
  }
  void barrier() override { host_->barrier(); }
  std::unique_ptr<Communicator> subgroup(const RankSet& ranks) override {
    return make_staged_communicator(host_->subgroup(ranks), device_);
  }

 private:
  static std::unique_ptr<Work> finish(std::unique_ptr<Work> host_work,
                                      std::vector<std::pair<at::Tensor, at::Tensor>> results,
                                      std::vector<at::Tensor> inputs) {
    return std::make_unique<StagedWork>(std::move(host_work), std::move(results), std::move(inputs));
  }

  std::unique_ptr<Communicator> host_;
  at::Device device_;
};

}  // namespace

std::unique_ptr<Communicator> make_staged_communicator(std::unique_ptr<Communicator> host,
                                                       const at::Device& device) {
  return std::make_unique<StagedCommunicator>(std::move(host), device);
}

}  // namespace paradyse::real
