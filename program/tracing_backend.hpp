// The backend that runs a strategy on shape-only tensors and records this rank's Program.
#pragma once

#include <memory>

#include "program/backend.hpp"
#include "program/program.hpp"

namespace paradyse {

class TracingBackend final : public Backend {
 public:
  // Rank `rank` of a job of `degree` ranks, the job its parallel group.
  TracingBackend(int rank, int degree);
  ~TracingBackend() override;

  // The program so far. Tensors still alive have not been freed in it yet.
  const Program& program() const;
  Program take_program();

  int rank() const override { return (job_rank_ - group_.first) / group_.stride; }
  int degree() const override { return group_.size; }
  int job_rank() const override { return job_rank_; }
  int job_degree() const override { return job_degree_; }
  RankSet parallel_ranks() const override { return group_; }
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

 public:
  // A trace has no values: read_scalar returns this (default 0). +infinity makes a read gradient norm
  // exceed any clipping limit, so that the traced step takes the branch that scales the gradients.
  void read_scalars_as(double value) { scalar_reads_ = value; }

  struct Recorder;  // the program being written, shared with the buffers that free into it

 private:
  Tensor allocate(const Shape& shape, DType dtype);
  // One bf16 output of `shape` from a pass over `inputs`: reads them whole and writes it, over
  // `elements` (Op::dims[0], what a framework's eager kernels are counted per).
  Tensor elementwise(Kernel kernel, std::initializer_list<const Tensor*> inputs, const Shape& shape,
                     int64_t elements);
  // An op of `kernel`, of the kind the op table gives it.
  Op& record(Kernel kernel, std::initializer_list<const Tensor*> inputs);
  // An op of a call that decides its kind (a collective's).
  Op& record(OpKind kind, Kernel kernel, std::initializer_list<const Tensor*> inputs);
  static void depend_on(Op& op, const Tensor& input);
  void produced_by(const Tensor& t, OpId op);
  Pending communicate(OpKind kind, const Tensor& input, Tensor result, CommGroup group = CommGroup::parallel);

  int job_rank_;
  int job_degree_;
  int shard_degree_;
  RankSet group_;  // the parallel group
  std::shared_ptr<Recorder> recorder_;
  double scalar_reads_ = 0;
};

}  // namespace paradyse
