// A Communicator that passes every call on to another and, at its N-th call, kills its own process
// with SIGKILL, as an OOM killer or a lost node would: no exception, no goodbye to the peers. The
// fault of the tests that check what a dead rank does to the others; installed with run_training's
// decorator (real_backend/real_run.hpp).
#pragma once

#include <csignal>
#include <memory>
#include <utility>

#include "real_backend/communicator.hpp"

namespace paradyse::testing {

class KillingCommunicator final : public real::Communicator {
 public:
  // Dies at call number `kill_at_call`, counting from 1 every collective, point-to-point exchange and
  // barrier issued through this object; never when it is 0.
  KillingCommunicator(std::unique_ptr<real::Communicator> inner, int kill_at_call)
      : inner_(std::move(inner)), kill_at_call_(kill_at_call) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  at::Device device() const override { return inner_->device(); }

  std::unique_ptr<real::Work> all_gather(const at::Tensor& input, at::Tensor& output) override {
    count_call();
    return inner_->all_gather(input, output);
  }
  std::unique_ptr<real::Work> reduce_scatter(const at::Tensor& input, at::Tensor& output) override {
    count_call();
    return inner_->reduce_scatter(input, output);
  }
  std::unique_ptr<real::Work> all_reduce(at::Tensor& inout) override {
    count_call();
    return inner_->all_reduce(inout);
  }
  std::unique_ptr<real::Work> all_to_all(const at::Tensor& input, at::Tensor& output) override {
    count_call();
    return inner_->all_to_all(input, output);
  }
  std::unique_ptr<real::Work> broadcast(at::Tensor& inout, int root) override {
    count_call();
    return inner_->broadcast(inout, root);
  }
  std::unique_ptr<real::Work> reduce(at::Tensor& inout, int root) override {
    count_call();
    return inner_->reduce(inout, root);
  }
  std::unique_ptr<real::Work> send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) override {
    count_call();
    return inner_->send_recv(send, to, recv, from);
  }
  void barrier() override {
    count_call();
    inner_->barrier();
  }
  std::unique_ptr<real::Communicator> subgroup(const RankSet& ranks) override {
    return inner_->subgroup(ranks);
  }

 private:
  void count_call() {
    if (++calls_ == kill_at_call_) std::raise(SIGKILL);
  }

  std::unique_ptr<real::Communicator> inner_;
  int kill_at_call_;
  int calls_ = 0;
};

}  // namespace paradyse::testing
