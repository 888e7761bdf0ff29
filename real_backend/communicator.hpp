// The real communicator a TorchBackend talks to: one group of ranks, collectives on flat contiguous
// tensors, each started asynchronously and finished by its Work. Two implementations: c10d's Gloo
// (CPU tensors, multi-process on one machine or over TCP) and NCCL (CUDA tensors), both behind this
// one interface so the backend never knows which.
//
// All buffers are contiguous, on device(), and of the same element type on every rank. Layouts are
// rank-major: all_gather's output is every rank's input in rank order; all_to_all's input and output are p
// equal chunks, chunk j of the input going to rank j and chunk j of the output coming from rank j.
#pragma once

#include <ATen/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "program/backend.hpp"
#include "real_backend/communication_error.hpp"

namespace paradyse::real {

// A started communication. wait() blocks until its buffers may be read (the output) or reused (the
// input) and throws CommunicationError if it failed.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "gloo", "nccl"
  // Where the tensors it takes live: the CPU for Gloo, the rank's GPU for NCCL (and for Gloo staging
  // CUDA tensors through the host).
  virtual at::Device device() const = 0;

  // output [p · input.numel()], rank-major.
  virtual std::unique_ptr<Work> all_gather(const at::Tensor& input, at::Tensor& output) = 0;
  // output [input.numel() / p]: the sum over ranks of input's chunk `rank()`.
  virtual std::unique_ptr<Work> reduce_scatter(const at::Tensor& input, at::Tensor& output) = 0;
  virtual std::unique_ptr<Work> all_reduce(at::Tensor& inout) = 0;  // sum, in place
  virtual std::unique_ptr<Work> all_to_all(const at::Tensor& input, at::Tensor& output) = 0;
  virtual std::unique_ptr<Work> broadcast(at::Tensor& inout, int root) = 0;
  // Sum onto root, in place there; elsewhere `inout` may be overwritten.
  virtual std::unique_ptr<Work> reduce(at::Tensor& inout, int root) = 0;
  // Sends `send` to rank `to` and receives `recv` (same size and type) from rank `from`.
  virtual std::unique_ptr<Work> send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) = 0;
  virtual void barrier() = 0;
  // `ranks` of this group as a group of their own (a grouped step's sequence-parallel group, shard
  // group or replicas), member i being rank ranks.rank(i), connected through the same store under a
  // key of their own: every one of them calls it, and no other rank does.
  virtual std::unique_ptr<Communicator> subgroup(const RankSet& ranks) = 0;
};

// The store key prefix of subgroup(ranks), unique per group.
std::string subgroup_prefix(const RankSet& ranks);
// Checks that `ranks` lie in a group of `group_size` and hold `rank`.
void check_subgroup(const RankSet& ranks, int rank, int group_size);

// Every rank's `values` on every rank: element i of the result holds value i of each rank, in rank
// order. For the few numbers (times, peaks) that a measurement summarises over the group.
std::vector<std::vector<double>> gather_values(Communicator& communicator, const std::vector<double>& values);

}  // namespace paradyse::real
