// The one interface strategies are written against. A backend is either the tracer (shape-only
// tensors; every call appends an op to this rank's program) or real tensors and a real communicator.
// Strategies never know which.
//
// It is four narrow parts, and code that needs only one takes only that one: Compute (the layer's
// math), Communication (collectives and point-to-point transfers), StepOperations (phases, weights and
// their gradients, the optimizer, values the host reads) and Groups (the ranks a call runs over).
// The op table (op_table.hpp) declares the kinds of work these calls issue.
//
// Layout conventions: activations are [b, s, ...] with the sequence in dim 1; attention takes
// q [b, s_q, heads, d], k and v [b, s_k, kv_heads, d] (FlashAttention's layout) and GQA when
// kv_heads < heads. Collectives run over the layer's parallel group of `degree()` ranks and count
// bytes as nccl-tests' bus bandwidth does (its doc/PERFORMANCE.md): (p−1)/p of the buffer for
// all-gather and reduce-scatter, 2(p−1)/p for all-reduce.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "program/attention_mask.hpp"
#include "program/norm_kind.hpp"
#include "program/tensor.hpp"

namespace paradyse {

class Communication;

// A started communication. wait() makes later compute wait for it and returns its result; it must be
// called exactly once (a dropped Pending is a bug: the compute stream would never wait for it).
class [[nodiscard]] Pending {
 public:
  Pending() = default;
  Pending(Communication* backend, int64_t token, Tensor result)
      : backend_(backend), token_(token), result_(std::move(result)) {}
  Pending(Pending&& other) noexcept { *this = std::move(other); }
  Pending& operator=(Pending&& other) noexcept {
    backend_ = other.backend_;
    token_ = other.token_;
    result_ = std::move(other.result_);
    other.backend_ = nullptr;
    return *this;
  }
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;

  bool valid() const { return backend_ != nullptr; }
  Tensor wait();

 private:
  Communication* backend_ = nullptr;
  int64_t token_ = 0;
  Tensor result_;
};

struct AttentionOutput {
  Tensor out;  // [b, s_q, heads, d]
  Tensor lse;  // [b, heads, s_q] fp32, log-sum-exp of each query's scores: what ring blocks merge by
};

struct AttentionGrads {
  Tensor d_q, d_k, d_v;
};

struct NormOutput {
  Tensor y;
  Tensor stats;  // [b, s] fp32 (mean and reciprocal std, or rms)
};

struct NormGrads {
  Tensor d_x, d_gamma, d_beta;  // d_beta undefined for RMSNorm
};

struct DropoutOutput {
  Tensor y;
  Tensor mask;  // u8, same shape as the input
};

// Which random stream a dropout mask is drawn from. per_rank: the tensor is this rank's own part
// (its tokens, its heads), so ranks draw different masks. replicated: every rank holds the whole
// tensor and computes it alike, so every rank must draw the same mask. Megatron-LM likewise draws
// the second kind from its default generator, seeded alike on the tensor-parallel ranks, and the
// first from its model-parallel generator, seeded per rank (tensor_parallel/random.py).
enum class MaskStream : uint8_t { per_rank, replicated };

struct LossOutput {
  Tensor loss;      // [1] fp32: sum over the chunk's tokens
  Tensor d_logits;  // same shape as the logits: gradient of the summed loss
};

// Where in a training step the following ops belong; the cost model and profiler group by it.
enum class Phase : uint8_t {
  embedding_forward,
  layer_forward,
  head,
  layer_backward,
  embedding_backward,
  optimizer
};
std::string_view to_string(Phase phase);

// What a layer's backward runs again of its forward (activation recomputation): nothing, the
// attention core, or the whole layer. A framework issues host work of its own around a re-run (its
// checkpoint function, the RNG state it restores), so the cost model prices a layer phase by it.
enum class Rerun : uint8_t { nothing, attention, layer };

// The ranks a communication op runs over (Backend): the parallel group, the shard group that holds one
// replica of the weights (the job, or one node under hybrid sharding), the ranks that hold the same
// shard in every shard group (its replicas), or the whole job.
enum class CommGroup : uint8_t { parallel, shard, replica, job };

// Ranks first, first + stride, …, first + (size − 1)·stride of the job.
struct RankSet {
  int first = 0;
  int size = 1;
  int stride = 1;
  int rank(int i) const { return first + i * stride; }  // the job rank of member i
  bool holds(int job_rank) const {
    return job_rank >= first && (job_rank - first) % stride == 0 && (job_rank - first) / stride < size;
  }
  // Whether every member is a rank of a group of `group_size`.
  bool within(int group_size) const {
    return first >= 0 && size >= 1 && stride >= 1 && rank(size - 1) < group_size;
  }
};
std::string to_string(const RankSet& ranks);  // "ranks 2 + 4·i for i < 3"

// Checks that a shard group of `degree` ranks divides a job of `job_degree` (Groups::use_shard_degree).
void check_shard_degree(int degree, int job_degree);

// The ranks a call runs over: this rank's parallel group, and the job and its shard groups.
class Groups {
 public:
  virtual ~Groups() = default;

  virtual int rank() const = 0;    // index in the parallel group
  virtual int degree() const = 0;  // p, ranks in the group

  // The job and its groups. A step that several groups of ranks train at once, each group on its own
  // micro-batch (FlexSP's heterogeneous sequence-parallel groups; grouped_step.hpp), shards the
  // weights over all job_degree() ranks of the job and gathers them from all of them; the parallel
  // group that rank(), degree() and the collectives use is then one of its groups, ranks
  // [first, first + degree()) of the job. A backend starts with the whole job as its group.
  virtual int job_rank() const = 0;
  virtual int job_degree() const = 0;
  // The parallel group's job ranks: consecutive, or strided inside a GroupScope.
  virtual RankSet parallel_ranks() const = 0;
  // Makes ranks [first_rank, first_rank + degree) of the job this rank's parallel group; it must be
  // one of them, and every other rank of that group must make the same group its own.
  virtual void use_group(int first_rank, int degree) = 0;
  // Hybrid sharding (FSDP's HYBRID_SHARD): a grouped step's weights are sharded over shard groups of
  // shard_degree() consecutive ranks (one node), each shard group holding a whole replica of them, so
  // that the per-layer gathers stay inside a node; each gradient shard is then summed over its
  // replicas, the ranks that hold the same shard in the other shard groups. By default the shard
  // group is the whole job (FULL_SHARD). Set it before any weight is made; it must divide the job.
  virtual int shard_degree() const = 0;
  virtual void use_shard_degree(int degree) = 0;
  int shard_rank() const { return job_rank() % shard_degree(); }  // which shard this rank holds
  // The job ranks `group` names for this rank.
  RankSet ranks_of(CommGroup group) const;

 protected:
  friend class GroupScope;
  // Makes `ranks` the parallel group (GroupScope); nothing else of the backend's state changes.
  virtual void set_parallel_ranks(const RankSet& ranks) = 0;
};

// The layer's math, on the compute stream.
class Compute {
 public:
  virtual ~Compute() = default;

  // A label for the following ops ("qkv", "ring step 3"); the tracer and profiler record it.
  virtual void label(std::string_view name) = 0;

  // Tensors and views. view/slice share storage; concat copies.
  virtual Tensor zeros(const Shape& shape, DType dtype) = 0;
  virtual Tensor view(const Tensor& x, const Shape& shape) = 0;
  virtual Tensor slice(const Tensor& x, int dim, int64_t start, int64_t length) = 0;
  virtual Tensor concat(const std::vector<Tensor>& parts, int dim) = 0;
  virtual Tensor cast(const Tensor& x, DType dtype) = 0;  // a copy in another element type

  // GEMMs. linear: x [..., k] · wᵀ with w [n, k]. matmul: x [..., k] · w with w [k, n].
  // weight_grad: aᵀ · b over the flattened leading dims, a [..., m], b [..., n] → [m, n].
  virtual Tensor linear(const Tensor& x, const Tensor& w) = 0;
  virtual Tensor matmul(const Tensor& x, const Tensor& w) = 0;
  virtual Tensor weight_grad(const Tensor& a, const Tensor& b) = 0;

  // Fused (FlashAttention) attention over the pairs the mask allows, scale 1/sqrt(d).
  virtual AttentionOutput attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const AttentionMask& mask) = 0;
  // Gradients of one block given the merged output and log-sum-exp of the whole row (ring attention
  // calls it per block with the final out and lse).
  virtual AttentionGrads attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k,
                                            const Tensor& v, const Tensor& out, const Tensor& lse,
                                            const AttentionMask& mask) = 0;
  // out, lse ← the attention over both key sets: the stable form of lse = log(e^lse + e^block_lse).
  virtual void merge_attention(Tensor& out, Tensor& lse, const AttentionOutput& block) = 0;

  // Unfused attention pieces (Colossal-AI ring self-attention materialises the scores).
  // scores: q [b, s_q, a, d], k [b, s_k, a, d] → [b, a, s_q, s_k] = q·kᵀ.
  virtual Tensor scores(const Tensor& q, const Tensor& k) = 0;
  // scores_times: p [b, a, s_q, s_k], v [b, s_k, a, d] → [b, s_q, a, d] = p·v.
  virtual Tensor scores_times(const Tensor& p, const Tensor& v) = 0;
  // scores_transposed_times: p [b, a, s_q, s_k], x [b, s_q, a, d] → [b, s_k, a, d] = pᵀ·x.
  virtual Tensor scores_transposed_times(const Tensor& p, const Tensor& x) = 0;
  // Row softmax of scale·scores over the pairs the mask allows (others get probability 0).
  virtual Tensor softmax(const Tensor& scores, double scale, const AttentionMask& mask) = 0;
  virtual Tensor softmax_backward(const Tensor& d_probs, const Tensor& probs, double scale) = 0;

  virtual NormOutput norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  NormKind kind) = 0;
  virtual NormGrads norm_backward(const Tensor& d_y, const Tensor& x, const Tensor& gamma,
                                  const NormOutput& saved, NormKind kind) = 0;

  virtual Tensor gelu(const Tensor& x) = 0;
  virtual Tensor gelu_backward(const Tensor& d_y, const Tensor& x) = 0;
  // x [..., 2f] holds (gate, up) → silu(gate) · up [..., f].
  virtual Tensor swiglu(const Tensor& x) = 0;
  virtual Tensor swiglu_backward(const Tensor& d_y, const Tensor& x) = 0;
  // Rotary position embedding of q or k [b, s, heads, d], its s tokens at `at`: the pair (i, i + d/2)
  // of each head rotated by position · θ^(−2i/d) (the Llama family's rotate_half form); its backward
  // rotates the gradient back.
  virtual Tensor rotary(const Tensor& x, const RotaryPositions& at) = 0;
  virtual Tensor rotary_backward(const Tensor& d_y, const RotaryPositions& at) = 0;
  // `stream`: where the mask's random bits come from (MaskStream).
  virtual DropoutOutput dropout(const Tensor& x, double probability, MaskStream stream) = 0;
  virtual Tensor dropout_backward(const Tensor& d_y, const Tensor& mask, double probability) = 0;

  virtual Tensor add(const Tensor& a, const Tensor& b) = 0;
  virtual void add_(Tensor& accumulator, const Tensor& x) = 0;  // in place

  // Token embedding: tokens [b, s] int64, table [rows, h] holding vocabulary rows first_row …
  // first_row + rows − 1 → [b, s, h], zero for a token outside them (the whole table: first_row 0;
  // a vocabulary shard: Megatron-LM's VocabParallelEmbedding, whose partial sums the ranks then sum).
  // Backward scatters d_y into [rows, h], skipping tokens outside the rows.
  virtual Tensor embedding(const Tensor& tokens, const Tensor& table, int64_t first_row) = 0;
  virtual Tensor embedding_backward(const Tensor& d_y, const Tensor& tokens, int64_t rows,
                                    int64_t first_row) = 0;
  // Cross-entropy of logits [b, c, V] against targets [b, c] int64, fused with its gradient. A target
  // below 0 is padding: no loss, no gradient.
  virtual LossOutput cross_entropy(const Tensor& logits, const Tensor& targets) = 0;
  // Cross-entropy over a vocabulary split over the ranks, as Megatron-LM computes it
  // (tensor_parallel/cross_entropy.py): logits [b, c, rows] are this rank's vocabulary rows first_row …
  // first_row + rows − 1. logits_max: each row's largest logit here, [b, c, 1] fp32. With every rank's
  // maxima gathered, maxima [b, c, p] (their largest, M, is the row's), vocabulary_shard_sums: this
  // rank's Σ exp(z − M) and its z[target] − M (0 when the target is not its), [b, c, 2] fp32, which
  // the ranks sum. vocabulary_shard_loss: from the summed `sums`, loss_weight · the loss of the chunk's
  // tokens ([1] fp32) and the gradient of the loss by this rank's logits.
  virtual Tensor logits_max(const Tensor& logits) = 0;
  virtual Tensor vocabulary_shard_sums(const Tensor& logits, const Tensor& targets, int64_t first_row,
                                       const Tensor& maxima) = 0;
  virtual LossOutput vocabulary_shard_loss(const Tensor& logits, const Tensor& targets, int64_t first_row,
                                           const Tensor& maxima, const Tensor& sums, double loss_weight) = 0;
};

// What a training step does around its layers: its phases, the weights and their gradient buffers,
// the optimizer, and the values the host reads.
class StepOperations {
 public:
  virtual ~StepOperations() = default;

  // Marks the start of a phase of the step (layer = -1 outside the layers); `rerun`: what the layer's
  // backward runs again of its forward, on both of its phases.
  virtual void begin_phase(Phase phase, int layer, Rerun rerun = Rerun::nothing) = 0;

  // This rank's shard of a model weight, created once per model; `name` and `shard` identify it so
  // that a real backend initialises it consistently with a one-device reference. Weights, gradients
  // and optimizer state are the static memory terms, not part of the activation timeline.
  virtual Tensor parameter(std::string_view name, const Shape& shape, int shard) = 0;
  // A zero gradient accumulator of the given shape (static memory, like parameters): fp32, the main
  // gradient Megatron-LM accumulates bf16 weight gradients into (--accumulate-allreduce-grads-in-fp32).
  virtual Tensor gradient_buffer(const Shape& shape) = 0;

  // Mixed-precision Adam on one weight shard and its fp32 main gradient (the fp32 master weight and
  // moments are the backend's): 18 bytes per parameter in all with the bf16 weight, Megatron-LM's
  // "bf16 parameters, fp32 gradients" (Megatron Core, Distributed Optimizer).
  virtual void adam_step(Tensor& weight, const Tensor& grad) = 0;
  // weight · Σ of the squares of every element of `tensors`, a [1] fp32 tensor: one multi-tensor kernel
  // reading each tensor once (Megatron-LM's multi_tensor_l2norm, for the gradient norm).
  virtual Tensor sum_of_squares(const std::vector<Tensor>& tensors, double weight) = 0;
  // Every tensor times `factor`, in place: one multi-tensor kernel (multi_tensor_scale, which clips).
  virtual void scale_(const std::vector<Tensor>& tensors, double factor) = 0;
  // The host reads a one-element tensor (`.item()`: a loss to log, a gradient norm to clip by), so it
  // waits for it, and for everything issued before it on the compute stream, before it issues more.
  virtual double read_scalar(const Tensor& x) = 0;

  // Activation offload (Recompute::offload), as Megatron-LM's --cpu-offloading and TransformerEngine's
  // CPU offload run it: what a layer's forward keeps for its backward waits in host memory between the
  // two. offload_mark() before the layer's forward. offload_start(mark, also, keep) after it copies to
  // host memory, on the copy stream, every buffer made since the mark that something still holds, and
  // those of `also`, but none of `keep` (the layer's output); offload_finish makes the compute stream wait
  // for that copy and frees their device memory. reload_start copies them back into device memory on
  // the copy stream; reload_finish makes the compute stream wait for it, before the layer's backward
  // reads them. The handles stay valid throughout; a backend whose device memory is the host's moves
  // nothing.
  virtual int64_t offload_mark() = 0;
  virtual int64_t offload_start(int64_t mark, const std::vector<Tensor>& also,
                                const std::vector<Tensor>& keep) = 0;
  virtual void offload_finish(int64_t offloaded) = 0;
  virtual void reload_start(int64_t offloaded) = 0;
  virtual void reload_finish(int64_t offloaded) = 0;
};

// Collectives and point-to-point transfers, on the communication stream.
class Communication {
 public:
  virtual ~Communication() = default;

  // Over the parallel group:
  // all_gather: concatenates every rank's x along dim. reduce_scatter: sums, keeps this rank's
  // 1/p slice along dim. all_to_all: splits x into p parts along split_dim, sends part j to rank j,
  // concatenates the received parts along concat_dim. broadcast: root's x to all (x gives the shape
  // on other ranks). reduce: sum onto root (undefined result elsewhere). send_recv: sends x to
  // `to`, receives a tensor of x's shape and type from `from`.
  Pending all_gather_async(const Tensor& x, int dim) { return all_gather_over(CommGroup::parallel, x, dim); }
  Pending reduce_scatter_async(const Tensor& x, int dim) {
    return reduce_scatter_over(CommGroup::parallel, x, dim);
  }
  Pending all_reduce_async(const Tensor& x) { return all_reduce_over(CommGroup::parallel, x); }
  virtual Pending all_to_all_async(const Tensor& x, int split_dim, int concat_dim) = 0;
  virtual Pending broadcast_async(const Tensor& x, int root) = 0;
  virtual Pending reduce_async(const Tensor& x, int root) = 0;
  virtual Pending send_recv_async(const Tensor& x, int to, int from) = 0;
  // Collectives over the other groups of CommGroup instead of the parallel group: how a grouped step
  // gathers the weights every group needs (over the shard group), sums the gradients every group
  // computed (reduce-scattered over the shard group, then all-reduced over the replicas), and sums what
  // every rank holds whole (over the job). Over a group of one rank they return x and record nothing.
  Pending shard_all_gather_async(const Tensor& x, int dim) {
    return all_gather_over(CommGroup::shard, x, dim);
  }
  Pending shard_reduce_scatter_async(const Tensor& x, int dim) {
    return reduce_scatter_over(CommGroup::shard, x, dim);
  }
  Pending replica_all_reduce_async(const Tensor& x) { return all_reduce_over(CommGroup::replica, x); }
  Pending job_all_reduce_async(const Tensor& x) { return all_reduce_over(CommGroup::job, x); }
  // The three collectives that run over any CommGroup; what the calls above are written on.
  virtual Pending all_gather_over(CommGroup group, const Tensor& x, int dim) = 0;
  virtual Pending reduce_scatter_over(CommGroup group, const Tensor& x, int dim) = 0;
  virtual Pending all_reduce_over(CommGroup group, const Tensor& x) = 0;

  Tensor all_gather(const Tensor& x, int dim) { return all_gather_async(x, dim).wait(); }
  Tensor reduce_scatter(const Tensor& x, int dim) { return reduce_scatter_async(x, dim).wait(); }
  Tensor all_reduce(const Tensor& x) { return all_reduce_async(x).wait(); }
  Tensor all_to_all(const Tensor& x, int split_dim, int concat_dim) {
    return all_to_all_async(x, split_dim, concat_dim).wait();
  }
  Tensor broadcast(const Tensor& x, int root) { return broadcast_async(x, root).wait(); }
  Tensor reduce(const Tensor& x, int root) { return reduce_async(x, root).wait(); }
  Tensor shard_all_gather(const Tensor& x, int dim) { return shard_all_gather_async(x, dim).wait(); }
  Tensor shard_reduce_scatter(const Tensor& x, int dim) { return shard_reduce_scatter_async(x, dim).wait(); }
  Tensor replica_all_reduce(const Tensor& x) { return replica_all_reduce_async(x).wait(); }
  Tensor job_all_reduce(const Tensor& x) { return job_all_reduce_async(x).wait(); }

 protected:
  friend class Pending;
  // Makes the compute stream wait for communication `token`; returns its result.
  virtual Tensor wait(int64_t token, Tensor result) = 0;
};

class Backend : public Groups, public Compute, public StepOperations, public Communication {};

// Makes `ranks` (job ranks, this rank among them) the parallel group until the scope ends, when the
// group before it is restored: how a 2-D strategy runs one of its dimensions (the all-to-all over a
// Ulysses group, the ring over the ranks that hold the same heads) on a part of its group, with the code
// of the 1-D strategy that runs it. Every rank of `ranks` must enter the same scope.
class GroupScope {
 public:
  GroupScope(Groups& be, const RankSet& ranks);
  ~GroupScope();
  GroupScope(const GroupScope&) = delete;
  GroupScope& operator=(const GroupScope&) = delete;

 private:
  Groups& be_;
  RankSet outer_;
};

// The parallel group split in two (a 2-D strategy's): `inner`, this rank's group of `inner_size`
// consecutive ranks (one node's NVLink when it fits in one), and `outer`, the ranks at this rank's place
// in every inner group (stride inner_size), one from each. inner_size must divide the degree.
struct GroupSplit {
  RankSet inner, outer;
};
GroupSplit split_group(const Groups& be, int inner_size);

inline Tensor Pending::wait() {
  PARADYSE_CHECK(backend_ != nullptr, "wait() on a Pending that was never started or already waited");
  Communication* backend = backend_;
  backend_ = nullptr;
  return backend->wait(token_, std::move(result_));
}

}  // namespace paradyse
