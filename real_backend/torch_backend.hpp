// The real backend: the strategies' Backend on LibTorch tensors and a real Communicator. The same
// strategy code that the tracer records computes real numbers here, forward and backward.
//
// Element types: a tensor keeps its logical DType (what the tracer counts bytes by); its storage
// is that type under Precision::mixed (bf16 activations and weights, fp32 where the strategies ask
// for it) or float32 throughout under Precision::fp32, which tests use to compare with a reference
// at float32's tolerance. Attention is FlashAttention-2 on a GPU in bf16 (varlen_attention.hpp), else
// computed exactly (scores materialised per block of queries, in float32), masked by token position as
// AttentionMask says.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "program/backend.hpp"
#include "program/program.hpp"
#include "real_backend/activation_offload.hpp"
#include "real_backend/communicator.hpp"
#include "real_backend/device.hpp"
#include "real_backend/held_bytes.hpp"
#include "real_backend/model_weights.hpp"
#include "real_backend/precision.hpp"
#include "real_backend/varlen_attention.hpp"

namespace paradyse::real {

struct TorchBackendOptions {
  at::Device device = at::kCPU;
  Precision precision = Precision::fp32;
  uint64_t weight_seed = 1;
  double learning_rate = 1e-4;  // AdamW, β = (0.9, 0.999), ε = 1e-8, no weight decay
  bool profile_ops = false;     // time every op (ops_timed())
  // Attention as variable-length tiles (varlen_attention.hpp): FlashAttention-2 where it runs (CUDA,
  // bf16), else the exact attention tile by tile. Off: the exact attention over the whole mask, which
  // is what CPUs run (tiling adds copies and saves nothing there). Unset: on on a GPU.
  std::optional<bool> varlen_attention;
  // The exact attention computes a block of queries against their keys at a time: the block's fp32
  // scores take at most this (one query row at least). Its working set is a few times this, whatever
  // the sequence's length; larger blocks mean fewer, larger GEMMs.
  int64_t attention_block_bytes = int64_t{64} << 20;
};

// One communication call as the strategy issued it, counted as the tracer counts it (Op).
struct CommunicationCall {
  OpKind kind;
  CommGroup group;
  int group_first;
  int group_size;
  int group_stride;
  double size_bytes;
  double bus_bytes;
  int root = -1, send_to = -1, recv_from = -1;
  friend bool operator==(const CommunicationCall&, const CommunicationCall&) = default;
};

// Time of one backend call in the device's order (DeviceClock): on CPU, where ops are synchronous,
// the call's wall time; on a GPU, from an event before its kernels to one after them, so that on a
// busy stream it includes the wait for the work queued before it.
struct OpTiming {
  Phase phase;
  int layer;
  std::string label;
  std::string_view op;  // Kernel's or OpKind's name (static)
  double seconds;
};

// Time at which a phase began, seconds since the records were last cleared, in the device's order.
struct PhaseTiming {
  Phase phase;
  int layer;
  double start_s;
  int64_t live_bytes;  // held_bytes().current() then
};

class TorchBackend final : public Backend {
 public:
  TorchBackend(Communicator& communicator, const ModelSpec& model, TorchBackendOptions options = {});
  ~TorchBackend() override;

  // A handle on a LibTorch tensor of logical type `dtype` (its storage converted as the precision says).
  Tensor wrap(const at::Tensor& t, DType dtype);
  static const at::Tensor& unwrap(const Tensor& t);
  at::ScalarType storage_type(DType dtype) const;

  const std::vector<CommunicationCall>& communication_calls() const { return calls_; }
  // Reading these waits for the device to reach the last stamp they hold.
  std::vector<OpTiming> ops_timed() const;
  std::vector<PhaseTiming> phases_timed() const;
  // Bytes this backend holds (held_bytes.hpp): what the simulator's memory timeline predicts.
  HeldBytes& held_bytes() { return *held_; }
  void clear_records();
  void set_profile_ops(bool on) { options_.profile_ops = on; }
  double seconds_since_start() const;  // wall clock
  void synchronize() const;            // waits for the device (a no-op on CPU)

  int rank() const override { return group_->rank(); }
  int degree() const override { return group_->size(); }
  int job_rank() const override { return job_.rank(); }
  int job_degree() const override { return job_.size(); }
  RankSet parallel_ranks() const override { return group_ranks_; }
  void use_group(int first_rank, int degree) override;
  int shard_degree() const override { return shard_degree_; }
  void use_shard_degree(int degree) override;
  void begin_phase(Phase phase, int layer, Rerun rerun = Rerun::nothing) override;
  void label(std::string_view name) override;

  Tensor parameter(std::string_view name, const Shape& shape, int shard) override;
  Tensor gradient_buffer(const Shape& shape) override;
  Tensor zeros(const Shape& shape, DType dtype) override;
  Tensor view(const Tensor& x, const Shape& shape) override;
  Tensor slice(const Tensor& x, int dim, int64_t start, int64_t length) override;
  Tensor concat(const std::vector<Tensor>& parts, int dim) override;
  Tensor cast(const Tensor& x, DType dtype) override;

  Tensor linear(const Tensor& x, const Tensor& w) override;
  Tensor matmul(const Tensor& x, const Tensor& w) override;
  Tensor weight_grad(const Tensor& a, const Tensor& b) override;

  AttentionOutput attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionMask& mask) override;
  AttentionGrads attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& out, const Tensor& lse, const AttentionMask& mask) override;
  void merge_attention(Tensor& out, Tensor& lse, const AttentionOutput& block) override;

  Tensor scores(const Tensor& q, const Tensor& k) override;
  Tensor scores_times(const Tensor& p, const Tensor& v) override;
  Tensor scores_transposed_times(const Tensor& p, const Tensor& x) override;
  Tensor softmax(const Tensor& scores, double scale, const AttentionMask& mask) override;
  Tensor softmax_backward(const Tensor& d_probs, const Tensor& probs, double scale) override;

  NormOutput norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, NormKind kind) override;
  NormGrads norm_backward(const Tensor& d_y, const Tensor& x, const Tensor& gamma, const NormOutput& saved,
                          NormKind kind) override;
  Tensor gelu(const Tensor& x) override;
  Tensor gelu_backward(const Tensor& d_y, const Tensor& x) override;
  Tensor swiglu(const Tensor& x) override;
  Tensor swiglu_backward(const Tensor& d_y, const Tensor& x) override;
  Tensor rotary(const Tensor& x, const RotaryPositions& at) override;
  Tensor rotary_backward(const Tensor& d_y, const RotaryPositions& at) override;
  DropoutOutput dropout(const Tensor& x, double probability, MaskStream stream) override;
  Tensor dropout_backward(const Tensor& d_y, const Tensor& mask, double probability) override;
  Tensor add(const Tensor& a, const Tensor& b) override;
  void add_(Tensor& accumulator, const Tensor& x) override;

  Tensor embedding(const Tensor& tokens, const Tensor& table, int64_t first_row) override;
  Tensor embedding_backward(const Tensor& d_y, const Tensor& tokens, int64_t rows,
                            int64_t first_row) override;
  LossOutput cross_entropy(const Tensor& logits, const Tensor& targets) override;
  Tensor logits_max(const Tensor& logits) override;
  Tensor vocabulary_shard_sums(const Tensor& logits, const Tensor& targets, int64_t first_row,
                               const Tensor& maxima) override;
  LossOutput vocabulary_shard_loss(const Tensor& logits, const Tensor& targets, int64_t first_row,
                                   const Tensor& maxima, const Tensor& sums, double loss_weight) override;
  void adam_step(Tensor& weight, const Tensor& grad) override;
  Tensor sum_of_squares(const std::vector<Tensor>& tensors, double weight) override;
  void scale_(const std::vector<Tensor>& tensors, double factor) override;
  double read_scalar(const Tensor& x) override;
  int64_t offload_mark() override;
  int64_t offload_start(int64_t mark, const std::vector<Tensor>& also,
                        const std::vector<Tensor>& keep) override;
  void offload_finish(int64_t offloaded) override;
  void reload_start(int64_t offloaded) override;
  void reload_finish(int64_t offloaded) override;

  Pending all_gather_over(CommGroup group, const Tensor& x, int dim) override;
  Pending reduce_scatter_over(CommGroup group, const Tensor& x, int dim) override;
  Pending all_reduce_over(CommGroup group, const Tensor& x) override;
  Pending all_to_all_async(const Tensor& x, int split_dim, int concat_dim) override;
  Pending broadcast_async(const Tensor& x, int root) override;
  Pending reduce_async(const Tensor& x, int root) override;
  Pending send_recv_async(const Tensor& x, int to, int from) override;

 protected:
  Tensor wait(int64_t token, Tensor result) override;
  void set_parallel_ranks(const RankSet& ranks) override;

 private:
  struct InFlight {
    std::unique_ptr<Work> work;
    std::vector<at::Tensor> keep_alive;  // buffers the communicator reads or writes until done
    std::function<at::Tensor()> finish;  // the result's final layout, once the data is there
    std::shared_ptr<void> held;          // counts keep_alive in HeldBytes
  };
  struct AdamState;
  class OpTimer;

  Tensor make(const at::Tensor& t, DType dtype) const;  // wraps storage already of the right type
  // A loss and its float32 gradient, the gradient stored in the logits' type: bf16 for the fused loss,
  // fp32 for the unfused loss's fp32 copy.
  LossOutput loss_output(const at::Tensor& loss, const at::Tensor& d_logits, DType logits_dtype) const;
  Pending start(OpKind kind, const Tensor& input, InFlight flight, Tensor result, int root = -1, int to = -1,
                int from = -1, CommGroup group = CommGroup::parallel);
  Communicator& communicator(CommGroup group);
  // The kernels attention runs on q's device and type, or null for the exact attention (varlen_attention
  // off).
  const VarlenKernels* varlen_kernels(const at::Tensor& q) const;
  Communicator& subgroup(const RankSet& ranks);  // made on first use
  at::TensorOptions options(DType dtype) const;

  std::shared_ptr<HeldBytes> held_ = std::make_shared<HeldBytes>();
  std::unique_ptr<ActivationOffload> offload_;  // notes every handle made while a layer may offload
  Communicator& job_;
  Communicator* group_;                     // the parallel group: the job, or one of subgroups_
  RankSet group_ranks_{0, job_.size(), 1};  // group_'s job ranks
  int shard_degree_ = job_.size();
  int groups_used_ = 0;  // use_group calls: what the replicated dropout stream is reseeded by
  std::map<std::tuple<int, int, int>, std::unique_ptr<Communicator>> subgroups_;  // by (first, size, stride)
  const ModelSpec& model_;
  TorchBackendOptions options_;
  ModelWeights weights_;
  Phase phase_ = Phase::layer_forward;
  int layer_ = -1;
  std::string label_;
  int64_t next_token_ = 0;
  std::unordered_map<int64_t, InFlight> in_flight_;
  std::unordered_map<const TensorImpl*, std::unique_ptr<AdamState>> adam_;
  at::Generator dropout_generator_;             // MaskStream::per_rank: seeded by rank
  at::Generator replicated_dropout_generator_;  // MaskStream::replicated: seeded alike on every rank
  // Timings as stamps of clock_, turned into seconds when read.
  struct OpStamps {
    Phase phase;
    int layer;
    std::string label;
    std::string_view op;
    DeviceClock::Stamp start, end;
  };
  struct PhaseStamp {
    Phase phase;
    int layer;
    DeviceClock::Stamp start;
    int64_t live_bytes;
  };
  std::vector<CommunicationCall> calls_;
  DeviceClock clock_;
  std::vector<OpStamps> op_stamps_;
  std::vector<PhaseStamp> phase_stamps_;
  std::chrono::steady_clock::time_point start_time_;
};

}  // namespace paradyse::real
