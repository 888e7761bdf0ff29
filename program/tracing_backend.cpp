#include "program/tracing_backend.hpp"

#include <algorithm>
#include <array>
#include <unordered_map>
#include "common/attention_flops.hpp"

namespace paradyse {
namespace {

constexpr OpId kNoOp = UINT32_MAX;

int normalize_dim(const Tensor& x, int dim) {
  return dim < 0 ? dim + x.rank() : dim;
}

int64_t leading(const Tensor& x) {
  return x.numel() / x.size(-1);
}

}  // namespace

struct TracingBackend::Recorder {
  Program program;
  Phase phase = Phase::layer_forward;
  int16_t layer = -1;
  uint16_t label = 0;
  std::unordered_map<std::string, uint16_t> label_ids{{"", 0}};

  OpId next_op() const { return static_cast<OpId>(program.ops.size()); }
  void memory_event(int64_t bytes) { program.memory.push_back({next_op(), bytes}); }
  void host_memory_event(int64_t bytes) { program.host_memory.push_back({next_op(), bytes}); }

  // Activation offload (Backend::offload_mark): the buffers made since the first open mark, and each
  // offloaded set by its handle.
  struct Offloaded {
    std::vector<std::weak_ptr<TensorImpl>> buffers;
    OpId copy = 0;  // the op that copies them, out or back
  };
  std::vector<std::weak_ptr<TensorImpl>> made;
  int64_t open_marks = 0;
  int64_t made_before = 0;  // made[0] is the buffer made after this many had been
  std::vector<Offloaded> offloaded;
};

namespace {

// A shape-only buffer. Views share it; the free is recorded when the last view goes, in host memory
// while it is offloaded.
struct TracedBuffer final : TensorImpl {
  std::shared_ptr<TracingBackend::Recorder> recorder;
  int64_t bytes = 0;  // 0 for static buffers (weights, gradients): not on the activation timeline
  OpId producer = kNoOp;
  bool on_host = false;

  ~TracedBuffer() override {
    if (bytes > 0 && on_host)
      recorder->host_memory_event(-bytes);
    else if (bytes > 0)
      recorder->memory_event(-bytes);
  }
};

TracedBuffer& buffer(const Tensor& t) {
  return t.impl<TracedBuffer>();
}

}  // namespace

TracingBackend::TracingBackend(int rank, int degree)
    : job_rank_(rank),
      job_degree_(degree),
      shard_degree_(degree),
      group_{0, degree, 1},
      recorder_(std::make_shared<Recorder>()) {
  PARADYSE_CHECK(degree >= 1 && rank >= 0 && rank < degree, "rank outside the group");
  recorder_->program.rank = rank;
  recorder_->program.degree = degree;
  recorder_->program.job_rank = rank;
  recorder_->program.job_degree = degree;
}

void TracingBackend::use_group(int first_rank, int degree) {
  PARADYSE_CHECK(first_rank >= 0 && degree >= 1 && first_rank + degree <= job_degree_ &&
                     job_rank_ >= first_rank && job_rank_ < first_rank + degree,
                 "a group of ranks [" + std::to_string(first_rank) + ", " +
                     std::to_string(first_rank + degree) + ") that does not hold rank " +
                     std::to_string(job_rank_) + " of " + std::to_string(job_degree_));
  group_ = {first_rank, degree, 1};
}

void TracingBackend::set_parallel_ranks(const RankSet& ranks) {
  PARADYSE_CHECK(ranks.within(job_degree_) && ranks.holds(job_rank_),
                 "a group of " + to_string(ranks) + " that does not hold rank " + std::to_string(job_rank_) +
                     " of " + std::to_string(job_degree_));
  group_ = ranks;
}

void TracingBackend::use_shard_degree(int degree) {
  check_shard_degree(degree, job_degree_);
  shard_degree_ = degree;
}

TracingBackend::~TracingBackend() = default;

const Program& TracingBackend::program() const {
  return recorder_->program;
}

Program TracingBackend::take_program() {
  return std::move(recorder_->program);
}

void TracingBackend::begin_phase(Phase phase, int layer, Rerun rerun) {
  recorder_->phase = phase;
  recorder_->layer = static_cast<int16_t>(layer);
  recorder_->program.phases.push_back(
      {phase, layer, recorder_->next_op(), static_cast<uint32_t>(recorder_->program.memory.size()), rerun});
}

void TracingBackend::label(std::string_view name) {
  auto [it, inserted] = recorder_->label_ids.try_emplace(
      std::string(name), static_cast<uint16_t>(recorder_->program.labels.size()));
  if (inserted) recorder_->program.labels.emplace_back(name);
  recorder_->label = it->second;
}

Tensor TracingBackend::allocate(const Shape& shape, DType dtype) {
  auto impl = std::make_shared<TracedBuffer>();
  impl->recorder = recorder_;
  Tensor t(shape, dtype, impl);
  impl->bytes = static_cast<int64_t>(t.bytes());
  if (impl->bytes > 0) recorder_->memory_event(impl->bytes);
  if (recorder_->open_marks > 0 && impl->bytes > 0) recorder_->made.push_back(impl);
  return t;
}

int64_t TracingBackend::offload_mark() {
  Recorder& r = *recorder_;
  if (r.open_marks++ == 0) {
    r.made_before += static_cast<int64_t>(r.made.size());
    r.made.clear();
  }
  return r.made_before + static_cast<int64_t>(r.made.size());
}

int64_t TracingBackend::offload_start(int64_t mark, const std::vector<Tensor>& also,
                                      const std::vector<Tensor>& keep) {
  Recorder& r = *recorder_;
  PARADYSE_CHECK(r.open_marks > 0 && mark >= r.made_before &&
                     mark <= r.made_before + static_cast<int64_t>(r.made.size()),
                 "offload_start without its offload_mark");
  std::vector<std::shared_ptr<TensorImpl>> held;
  const auto add = [&](const std::shared_ptr<TensorImpl>& impl) {
    if (!impl) return;
    const auto& b = static_cast<const TracedBuffer&>(*impl);
    if (b.bytes == 0 || b.on_host || std::find(held.begin(), held.end(), impl) != held.end()) return;
    for (const Tensor& k : keep)
      if (k.shared_impl() == impl) return;
    held.push_back(impl);
  };
  for (auto it = r.made.begin() + (mark - r.made_before); it != r.made.end(); ++it) add(it->lock());
  for (const Tensor& t : also) add(t.shared_impl());
  if (--r.open_marks == 0) {
    r.made_before += static_cast<int64_t>(r.made.size());
    r.made.clear();
  }
  Op& op = record(Kernel::offload, {});
  Recorder::Offloaded set;
  int64_t bytes = 0;
  for (const auto& impl : held) {
    const auto& b = static_cast<const TracedBuffer&>(*impl);
    if (b.producer != kNoOp && std::find(op.deps.begin(), op.deps.end(), b.producer) == op.deps.end())
      op.deps.push_back(b.producer);
    set.buffers.push_back(impl);
    bytes += b.bytes;
  }
  op.size_bytes = op.memory_bytes = static_cast<double>(bytes);
  set.copy = r.next_op() - 1;
  r.host_memory_event(bytes);
  r.offloaded.push_back(std::move(set));
  return static_cast<int64_t>(r.offloaded.size()) - 1;
}

void TracingBackend::offload_finish(int64_t offloaded) {
  Recorder::Offloaded& set = recorder_->offloaded.at(static_cast<std::size_t>(offloaded));
  Op& op = record(Kernel::wait, {});
  op.deps.push_back(set.copy);
  // The device copies go once the copy is done.
  for (const std::weak_ptr<TensorImpl>& weak : set.buffers)
    if (const std::shared_ptr<TensorImpl> impl = weak.lock()) {
      auto& b = static_cast<TracedBuffer&>(*impl);
      b.on_host = true;
      recorder_->memory_event(-b.bytes);
    }
}

void TracingBackend::reload_start(int64_t offloaded) {
  Recorder::Offloaded& set = recorder_->offloaded.at(static_cast<std::size_t>(offloaded));
  Op& op = record(Kernel::reload, {});
  op.deps.push_back(set.copy);
  double bytes = 0;
  for (const std::weak_ptr<TensorImpl>& weak : set.buffers)
    if (const std::shared_ptr<TensorImpl> impl = weak.lock()) {
      auto& b = static_cast<TracedBuffer&>(*impl);
      if (!b.on_host) continue;
      b.on_host = false;
      recorder_->memory_event(b.bytes);
      recorder_->host_memory_event(-b.bytes);
      bytes += static_cast<double>(b.bytes);
    }
  op.size_bytes = op.memory_bytes = bytes;
  set.copy = recorder_->next_op() - 1;
}

void TracingBackend::reload_finish(int64_t offloaded) {
  const Recorder::Offloaded& set = recorder_->offloaded.at(static_cast<std::size_t>(offloaded));
  Op& op = record(Kernel::wait, {});
  op.deps.push_back(set.copy);
  const OpId wait = recorder_->next_op() - 1;
  for (const std::weak_ptr<TensorImpl>& weak : set.buffers)
    if (const std::shared_ptr<TensorImpl> impl = weak.lock())
      static_cast<TracedBuffer&>(*impl).producer = wait;
}

Op& TracingBackend::record(Kernel kernel, std::initializer_list<const Tensor*> inputs) {
  PARADYSE_CHECK(call_info(kernel).op_kind.has_value(), "record() of a call whose op kind the call decides");
  return record(*call_info(kernel).op_kind, kernel, inputs);
}

Op& TracingBackend::record(OpKind kind, Kernel kernel, std::initializer_list<const Tensor*> inputs) {
  Op op;
  op.kind = kind;
  op.kernel = kernel;
  op.stream = kind == OpKind::host_copy ? Stream::copy
              : is_communication(kind)  ? Stream::communication
                                        : Stream::compute;
  op.phase = recorder_->phase;
  op.layer = recorder_->layer;
  op.label = recorder_->label;
  for (const Tensor* input : inputs)
    if (input != nullptr && input->defined()) depend_on(op, *input);
  recorder_->program.ops.push_back(std::move(op));
  return recorder_->program.ops.back();
}

void TracingBackend::depend_on(Op& op, const Tensor& input) {
  const OpId producer = input.impl<TracedBuffer>().producer;
  if (producer != kNoOp && std::find(op.deps.begin(), op.deps.end(), producer) == op.deps.end())
    op.deps.push_back(producer);
}

void TracingBackend::produced_by(const Tensor& t, OpId op) {
  buffer(t).producer = op;
}

Tensor TracingBackend::parameter(std::string_view, const Shape& shape, int) {
  auto impl = std::make_shared<TracedBuffer>();
  impl->recorder = recorder_;
  return Tensor(shape, DType::bf16, impl);
}

Tensor TracingBackend::gradient_buffer(const Shape& shape) {
  auto impl = std::make_shared<TracedBuffer>();
  impl->recorder = recorder_;
  return Tensor(shape, DType::fp32, impl);
}

Tensor TracingBackend::zeros(const Shape& shape, DType dtype) {
  Tensor t = allocate(shape, dtype);
  Op& op = record(Kernel::zeros, {});
  op.memory_bytes = static_cast<double>(t.bytes());
  produced_by(t, recorder_->next_op() - 1);
  return t;
}

Tensor TracingBackend::view(const Tensor& x, const Shape& shape) {
  Tensor t(shape, x.dtype(), x.shared_impl());
  PARADYSE_CHECK(t.numel() == x.numel(), "view " + to_string(x.shape()) + " as " + to_string(shape));
  return t;
}

Tensor TracingBackend::slice(const Tensor& x, int dim, int64_t start, int64_t length) {
  dim = normalize_dim(x, dim);
  PARADYSE_CHECK(start >= 0 && length > 0 && start + length <= x.size(dim),
                 "slice outside " + to_string(x.shape()));
  Shape shape = x.shape();
  shape[static_cast<std::size_t>(dim)] = length;
  return Tensor(shape, x.dtype(), x.shared_impl());
}

Tensor TracingBackend::concat(const std::vector<Tensor>& parts, int dim) {
  PARADYSE_CHECK(!parts.empty(), "concat of nothing");
  dim = normalize_dim(parts[0], dim);
  Shape shape = parts[0].shape();
  shape[static_cast<std::size_t>(dim)] = 0;
  for (const Tensor& part : parts) shape[static_cast<std::size_t>(dim)] += part.size(dim);
  Tensor out = allocate(shape, parts[0].dtype());
  Op& op = record(Kernel::concat, {});
  for (const Tensor& part : parts) depend_on(op, part);
  op.memory_bytes = 2.0 * static_cast<double>(out.bytes());
  produced_by(out, recorder_->next_op() - 1);
  return out;
}

Tensor TracingBackend::cast(const Tensor& x, DType dtype) {
  Tensor y = allocate(x.shape(), dtype);
  Op& op = record(Kernel::cast, {&x});
  op.memory_bytes = static_cast<double>(x.bytes() + y.bytes());
  produced_by(y, recorder_->next_op() - 1);
  return y;
}

namespace {
double gemm_bytes(int64_t m, int64_t n, int64_t k) {
  return 2.0 * static_cast<double>(m * k + k * n + m * n);
}
}  // namespace

Tensor TracingBackend::linear(const Tensor& x, const Tensor& w) {
  PARADYSE_CHECK(w.rank() == 2 && x.size(-1) == w.size(1),
                 "linear " + to_string(x.shape()) + " · " + to_string(w.shape()) + "ᵀ");
  Shape shape = x.shape();
  shape.back() = w.size(0);
  Tensor y = allocate(shape, DType::bf16);
  const int64_t m = leading(x), n = w.size(0), k = w.size(1);
  Op& op = record(Kernel::linear, {&x, &w});
  op.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  op.memory_bytes = gemm_bytes(m, n, k);
  op.dims = {m, n, k, 0};
  produced_by(y, recorder_->next_op() - 1);
  return y;
}

Tensor TracingBackend::matmul(const Tensor& x, const Tensor& w) {
  PARADYSE_CHECK(w.rank() == 2 && x.size(-1) == w.size(0),
                 "matmul " + to_string(x.shape()) + " · " + to_string(w.shape()));
  Shape shape = x.shape();
  shape.back() = w.size(1);
  Tensor y = allocate(shape, DType::bf16);
  const int64_t m = leading(x), n = w.size(1), k = w.size(0);
  Op& op = record(Kernel::matmul, {&x, &w});
  op.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  op.memory_bytes = gemm_bytes(m, n, k);
  op.dims = {m, n, k, 0};
  produced_by(y, recorder_->next_op() - 1);
  return y;
}

Tensor TracingBackend::weight_grad(const Tensor& a, const Tensor& b) {
  PARADYSE_CHECK(leading(a) == leading(b),
                 "weight_grad " + to_string(a.shape()) + "ᵀ · " + to_string(b.shape()));
  const int64_t m = a.size(-1), n = b.size(-1), k = leading(a);
  Tensor y = allocate({m, n}, DType::bf16);
  Op& op = record(Kernel::weight_grad, {&a, &b});
  op.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  op.memory_bytes = gemm_bytes(m, n, k);
  op.dims = {m, n, k, 0};
  produced_by(y, recorder_->next_op() - 1);
  return y;
}

namespace {
void check_attention_shapes(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask) {
  PARADYSE_CHECK(q.rank() == 4 && k.rank() == 4 && v.shape() == k.shape() && q.size(0) == k.size(0) &&
                     q.size(3) == k.size(3) && q.size(2) % k.size(2) == 0,
                 "attention q " + to_string(q.shape()) + " k " + to_string(k.shape()));
  PARADYSE_CHECK(
      mask.query_count() == q.size(1) && mask.key_count() == k.size(1),
      "attention mask positions do not match q " + to_string(q.shape()) + " k " + to_string(k.shape()));
}

// A fused attention kernel's FLOPs and the shape the cost model prices it by. FLOPs: `passes` times the
// multiply-adds of q·kᵀ and p·v over the computed pairs, 4·b·a·pairs·d (Korthikanti et al. 2022,
// App. A). Its key length is the longest document's keys, since a variable-length kernel tiles each
// document apart; partially masked when the causal mask or the documents leave out some pairs.
void describe_attention(Op& op, const Tensor& q, const AttentionMask& mask, double passes) {
  const double pairs = mask.computed_pairs();
  op.flops = passes * kAttentionForwardFlopsPerPairDim *
             static_cast<double>(q.size(0) * q.size(2) * q.size(3)) * pairs;
  op.dims = {q.size(0) * q.size(2), q.size(1), mask.longest_document_keys(), q.size(3)};
  op.partially_masked = pairs < static_cast<double>(mask.query_count() * mask.key_count());
  op.drops_out = mask.dropout > 0;
}

}  // namespace

AttentionOutput TracingBackend::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                  const AttentionMask& mask) {
  check_attention_shapes(q, k, v, mask);
  AttentionOutput result{allocate(q.shape(), DType::bf16),
                         allocate({q.size(0), q.size(2), q.size(1)}, DType::fp32)};
  Op& op = record(Kernel::attention_forward, {&q, &k, &v});
  describe_attention(op, q, mask, 1.0);
  op.memory_bytes =
      static_cast<double>(q.bytes() + k.bytes() + v.bytes() + result.out.bytes() + result.lse.bytes());
  produced_by(result.out, recorder_->next_op() - 1);
  produced_by(result.lse, recorder_->next_op() - 1);
  return result;
}

AttentionGrads TracingBackend::attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k,
                                                  const Tensor& v, const Tensor& out, const Tensor& lse,
                                                  const AttentionMask& mask) {
  check_attention_shapes(q, k, v, mask);
  AttentionGrads grads{allocate(q.shape(), DType::bf16), allocate(k.shape(), DType::bf16),
                       allocate(v.shape(), DType::bf16)};
  Op& op = record(Kernel::attention_backward, {&d_out, &q, &k, &v, &out, &lse});
  describe_attention(op, q, mask, kAttentionBackwardFlopsPerForward);
  op.memory_bytes =
      static_cast<double>(d_out.bytes() + q.bytes() + k.bytes() + v.bytes() + out.bytes() + lse.bytes() +
                          grads.d_q.bytes() + grads.d_k.bytes() + grads.d_v.bytes());
  const OpId id = recorder_->next_op() - 1;
  produced_by(grads.d_q, id);
  produced_by(grads.d_k, id);
  produced_by(grads.d_v, id);
  return grads;
}

void TracingBackend::merge_attention(Tensor& out, Tensor& lse, const AttentionOutput& block) {
  PARADYSE_CHECK(out.shape() == block.out.shape() && lse.shape() == block.lse.shape(),
                 "merge of unequal blocks");
  Op& op = record(Kernel::merge_attention, {&out, &lse, &block.out, &block.lse});
  op.memory_bytes = static_cast<double>(3 * out.bytes() + 3 * lse.bytes());
  produced_by(out, recorder_->next_op() - 1);
  produced_by(lse, recorder_->next_op() - 1);
}

namespace {
void check_heads_match(const Tensor& a, const Tensor& b, const char* what) {
  PARADYSE_CHECK(a.rank() == 4 && b.rank() == 4 && a.size(0) == b.size(0),
                 std::string(what) + " " + to_string(a.shape()) + " with " + to_string(b.shape()));
}
}  // namespace

Tensor TracingBackend::scores(const Tensor& q, const Tensor& k) {
  check_heads_match(q, k, "scores");
  PARADYSE_CHECK(q.size(2) == k.size(2) && q.size(3) == k.size(3), "scores needs equal heads and head dim");
  const int64_t batch_heads = q.size(0) * q.size(2), m = q.size(1), n = k.size(1), d = q.size(3);
  Tensor s = allocate({q.size(0), q.size(2), m, n}, DType::bf16);
  Op& op = record(Kernel::scores, {&q, &k});
  op.flops = 2.0 * static_cast<double>(batch_heads * m) * static_cast<double>(n * d);
  op.memory_bytes = static_cast<double>(q.bytes() + k.bytes() + s.bytes());
  op.dims = {batch_heads, m, n, d};
  produced_by(s, recorder_->next_op() - 1);
  return s;
}

Tensor TracingBackend::scores_times(const Tensor& p, const Tensor& v) {
  check_heads_match(p, v, "scores_times");
  PARADYSE_CHECK(p.size(1) == v.size(2) && p.size(3) == v.size(1), "scores_times shapes");
  const int64_t batch_heads = p.size(0) * p.size(1), m = p.size(2), n = v.size(3), k = p.size(3);
  Tensor y = allocate({p.size(0), m, p.size(1), n}, DType::bf16);
  Op& op = record(Kernel::scores_times, {&p, &v});
  op.flops = 2.0 * static_cast<double>(batch_heads * m) * static_cast<double>(n * k);
  op.memory_bytes = static_cast<double>(p.bytes() + v.bytes() + y.bytes());
  op.dims = {batch_heads, m, n, k};
  produced_by(y, recorder_->next_op() - 1);
  return y;
}

Tensor TracingBackend::scores_transposed_times(const Tensor& p, const Tensor& x) {
  check_heads_match(p, x, "scores_transposed_times");
  PARADYSE_CHECK(p.size(1) == x.size(2) && p.size(2) == x.size(1), "scores_transposed_times shapes");
  const int64_t batch_heads = p.size(0) * p.size(1), m = p.size(3), n = x.size(3), k = p.size(2);
  Tensor y = allocate({p.size(0), m, p.size(1), n}, DType::bf16);
  Op& op = record(Kernel::scores_transposed_times, {&p, &x});
  op.flops = 2.0 * static_cast<double>(batch_heads * m) * static_cast<double>(n * k);
  op.memory_bytes = static_cast<double>(p.bytes() + x.bytes() + y.bytes());
  op.dims = {batch_heads, m, n, k};
  produced_by(y, recorder_->next_op() - 1);
  return y;
}

Tensor TracingBackend::softmax(const Tensor& scores, double, const AttentionMask& mask) {
  PARADYSE_CHECK(
      scores.rank() == 4 && mask.query_count() == scores.size(2) && mask.key_count() == scores.size(3),
      "softmax mask positions do not match scores " + to_string(scores.shape()));
  Tensor p = allocate(scores.shape(), DType::bf16);
  Op& op = record(Kernel::softmax, {&scores});
  op.memory_bytes = static_cast<double>(scores.bytes() + p.bytes());
  produced_by(p, recorder_->next_op() - 1);
  return p;
}

Tensor TracingBackend::softmax_backward(const Tensor& d_probs, const Tensor& probs, double) {
  Tensor d = allocate(probs.shape(), DType::bf16);
  Op& op = record(Kernel::softmax_backward, {&d_probs, &probs});
  op.memory_bytes = static_cast<double>(d_probs.bytes() + probs.bytes() + d.bytes());
  produced_by(d, recorder_->next_op() - 1);
  return d;
}

NormOutput TracingBackend::norm_forward(const Tensor& x, const Tensor& gamma, const Tensor&, NormKind kind) {
  PARADYSE_CHECK(gamma.numel() == x.size(-1), "norm weight does not match " + to_string(x.shape()));
  NormOutput result{allocate(x.shape(), DType::bf16),
                    allocate({leading(x), kind == NormKind::layer_norm ? 2 : 1}, DType::fp32)};
  Op& op = record(Kernel::norm_forward, {&x});
  op.memory_bytes = static_cast<double>(x.bytes() + result.y.bytes() + result.stats.bytes());
  op.dims = {x.numel(), 0, 0, 0};
  produced_by(result.y, recorder_->next_op() - 1);
  produced_by(result.stats, recorder_->next_op() - 1);
  return result;
}

NormGrads TracingBackend::norm_backward(const Tensor& d_y, const Tensor& x, const Tensor& gamma,
                                        const NormOutput& saved, NormKind kind) {
  NormGrads grads{allocate(x.shape(), DType::bf16), allocate(gamma.shape(), DType::fp32),
                  kind == NormKind::layer_norm ? allocate(gamma.shape(), DType::fp32) : Tensor()};
  Op& op = record(Kernel::norm_backward, {&d_y, &x, &saved.stats});
  op.memory_bytes = static_cast<double>(d_y.bytes() + x.bytes() + saved.stats.bytes() + grads.d_x.bytes());
  op.dims = {x.numel(), 0, 0, 0};
  const OpId id = recorder_->next_op() - 1;
  produced_by(grads.d_x, id);
  produced_by(grads.d_gamma, id);
  if (grads.d_beta.defined()) produced_by(grads.d_beta, id);
  return grads;
}

namespace {
Shape with_last(const Shape& shape, int64_t last) {
  Shape result(shape.begin(), shape.end() - 1);
  result.push_back(last);
  return result;
}
}  // namespace

Tensor TracingBackend::elementwise(Kernel kernel, std::initializer_list<const Tensor*> inputs,
                                   const Shape& shape, int64_t elements) {
  Tensor out = allocate(shape, DType::bf16);
  Op& op = record(kernel, inputs);
  double bytes = static_cast<double>(out.bytes());
  for (const Tensor* input : inputs) bytes += static_cast<double>(input->bytes());
  op.memory_bytes = bytes;
  op.dims = {elements, 0, 0, 0};
  produced_by(out, recorder_->next_op() - 1);
  return out;
}

Tensor TracingBackend::gelu(const Tensor& x) {
  return elementwise(Kernel::gelu, {&x}, x.shape(), x.numel());
}

Tensor TracingBackend::gelu_backward(const Tensor& d_y, const Tensor& x) {
  return elementwise(Kernel::gelu_backward, {&d_y, &x}, x.shape(), x.numel());
}

// Elements: those of the product, half of x's.
Tensor TracingBackend::swiglu(const Tensor& x) {
  PARADYSE_CHECK(x.size(-1) % 2 == 0, "swiglu needs an even last dim, got " + to_string(x.shape()));
  const Shape product = with_last(x.shape(), x.size(-1) / 2);
  return elementwise(Kernel::swiglu, {&x}, product, x.numel() / 2);
}

Tensor TracingBackend::swiglu_backward(const Tensor& d_y, const Tensor& x) {
  return elementwise(Kernel::swiglu_backward, {&d_y, &x}, x.shape(), d_y.numel());
}

// Reads x and writes its rotation; the angles' table is a few KB and not counted.
Tensor TracingBackend::rotary(const Tensor& x, const RotaryPositions&) {
  return elementwise(Kernel::rotary, {&x}, x.shape(), x.numel());
}

Tensor TracingBackend::rotary_backward(const Tensor& d_y, const RotaryPositions&) {
  return elementwise(Kernel::rotary_backward, {&d_y}, d_y.shape(), d_y.numel());
}

DropoutOutput TracingBackend::dropout(const Tensor& x, double, MaskStream) {
  DropoutOutput result{allocate(x.shape(), DType::bf16), allocate(x.shape(), DType::u8)};
  Op& op = record(Kernel::dropout, {&x});
  op.memory_bytes = static_cast<double>(x.bytes() + result.y.bytes() + result.mask.bytes());
  produced_by(result.y, recorder_->next_op() - 1);
  produced_by(result.mask, recorder_->next_op() - 1);
  return result;
}

Tensor TracingBackend::dropout_backward(const Tensor& d_y, const Tensor& mask, double) {
  Tensor d_x = allocate(d_y.shape(), DType::bf16);
  Op& op = record(Kernel::dropout_backward, {&d_y, &mask});
  op.memory_bytes = static_cast<double>(d_y.bytes() + mask.bytes() + d_x.bytes());
  produced_by(d_x, recorder_->next_op() - 1);
  return d_x;
}

Tensor TracingBackend::add(const Tensor& a, const Tensor& b) {
  PARADYSE_CHECK(a.shape() == b.shape(), "add " + to_string(a.shape()) + " + " + to_string(b.shape()));
  Tensor y = allocate(a.shape(), a.dtype());
  Op& op = record(Kernel::add, {&a, &b});
  op.memory_bytes = static_cast<double>(a.bytes() + b.bytes() + y.bytes());
  produced_by(y, recorder_->next_op() - 1);
  return y;
}

void TracingBackend::add_(Tensor& accumulator, const Tensor& x) {
  PARADYSE_CHECK(accumulator.numel() == x.numel(),
                 "add_ " + to_string(accumulator.shape()) + " += " + to_string(x.shape()));
  Op& op = record(Kernel::add_, {&accumulator, &x});
  op.memory_bytes = static_cast<double>(2 * accumulator.bytes() + x.bytes());
  produced_by(accumulator, recorder_->next_op() - 1);
}

Tensor TracingBackend::embedding(const Tensor& tokens, const Tensor& table, int64_t /*first_row*/) {
  Shape shape = tokens.shape();
  shape.push_back(table.size(1));
  Tensor y = allocate(shape, DType::bf16);
  Op& op = record(Kernel::embedding, {&tokens, &table});
  op.memory_bytes = static_cast<double>(tokens.bytes() + 2 * y.bytes());
  produced_by(y, recorder_->next_op() - 1);
  return y;
}

Tensor TracingBackend::embedding_backward(const Tensor& d_y, const Tensor& tokens, int64_t rows,
                                          int64_t /*first_row*/) {
  Tensor d_table = allocate({rows, d_y.size(-1)}, DType::bf16);
  Op& op = record(Kernel::embedding_backward, {&d_y, &tokens});
  op.memory_bytes = static_cast<double>(d_table.bytes() + tokens.bytes() + 2 * d_y.bytes());
  produced_by(d_table, recorder_->next_op() - 1);
  return d_table;
}

namespace {
// fp32 logits are Megatron-LM's unfused cross-entropy's (LossKernel::unfused): its maximum, then the
// logits subtracted, exponentiated, summed and divided in place forward and scaled in place backward
// are ten passes over them (tensor_parallel/cross_entropy.py); its gradient is fp32. Megatron writes
// that gradient over the logits' copy, which here is a tensor of its own until the copy is freed.
// bf16 logits are the fused kernel's: a read each pass and the gradient's write.
double loss_passes_bytes(const Tensor& logits, double passes, double fused_passes) {
  return (logits.dtype() == DType::fp32 ? passes : fused_passes) * static_cast<double>(logits.bytes());
}
}  // namespace

LossOutput TracingBackend::cross_entropy(const Tensor& logits, const Tensor& targets) {
  LossOutput result{allocate({1}, DType::fp32), allocate(logits.shape(), logits.dtype())};
  Op& op = record(Kernel::cross_entropy, {&logits, &targets});
  op.memory_bytes = loss_passes_bytes(logits, 10, 3) + static_cast<double>(targets.bytes());
  produced_by(result.loss, recorder_->next_op() - 1);
  produced_by(result.d_logits, recorder_->next_op() - 1);
  return result;
}

// The vocabulary-parallel cross-entropy's three passes over the logits are priced as the fused
// cross-entropy is, by their bytes: one read of the logits each, and the gradient's write.
Tensor TracingBackend::logits_max(const Tensor& logits) {
  Shape shape = logits.shape();
  shape.back() = 1;
  Tensor maxima = allocate(shape, DType::fp32);
  Op& op = record(Kernel::cross_entropy, {&logits});
  op.memory_bytes = static_cast<double>(logits.bytes() + maxima.bytes());
  produced_by(maxima, recorder_->next_op() - 1);
  return maxima;
}

Tensor TracingBackend::vocabulary_shard_sums(const Tensor& logits, const Tensor& targets,
                                             int64_t /*first_row*/, const Tensor& maxima) {
  Shape shape = logits.shape();
  shape.back() = 2;
  Tensor sums = allocate(shape, DType::fp32);
  Op& op = record(Kernel::cross_entropy, {&logits, &targets, &maxima});
  op.memory_bytes =
      loss_passes_bytes(logits, 5, 1) + static_cast<double>(targets.bytes() + maxima.bytes() + sums.bytes());
  produced_by(sums, recorder_->next_op() - 1);
  return sums;
}

LossOutput TracingBackend::vocabulary_shard_loss(const Tensor& logits, const Tensor& targets,
                                                 int64_t /*first_row*/, const Tensor& maxima,
                                                 const Tensor& sums, double /*loss_weight*/) {
  LossOutput result{allocate({1}, DType::fp32), allocate(logits.shape(), logits.dtype())};
  Op& op = record(Kernel::cross_entropy, {&logits, &targets, &maxima, &sums});
  op.memory_bytes =
      loss_passes_bytes(logits, 4, 2) + static_cast<double>(targets.bytes() + maxima.bytes() + sums.bytes());
  produced_by(result.loss, recorder_->next_op() - 1);
  produced_by(result.d_logits, recorder_->next_op() - 1);
  return result;
}

double TracingBackend::read_scalar(const Tensor& x) {
  PARADYSE_CHECK(x.numel() == 1, "read_scalar of " + to_string(x.shape()));
  Op& op = record(Kernel::read_scalar, {&x});
  op.memory_bytes = static_cast<double>(x.bytes());  // the copy to the host
  op.host_waits = true;
  return scalar_reads_;
}

void TracingBackend::adam_step(Tensor& weight, const Tensor& grad) {
  Op& op = record(Kernel::adam_step, {&weight, &grad});
  // Reads the fp32 main gradient, reads and writes the fp32 master weight, first and second moment,
  // writes the bf16 weight: 4 + 3·(4 + 4) + 2 bytes per parameter.
  op.memory_bytes = static_cast<double>(grad.bytes()) + 26.0 * static_cast<double>(weight.numel());
  produced_by(weight, recorder_->next_op() - 1);
}

Tensor TracingBackend::sum_of_squares(const std::vector<Tensor>& tensors, double) {
  Tensor result = allocate({1}, DType::fp32);
  Op& op = record(Kernel::sum_of_squares, {});
  for (const Tensor& t : tensors) {
    depend_on(op, t);
    op.memory_bytes += static_cast<double>(t.bytes());
  }
  op.memory_bytes += static_cast<double>(result.bytes());
  produced_by(result, recorder_->next_op() - 1);
  return result;
}

void TracingBackend::scale_(const std::vector<Tensor>& tensors, double) {
  Op& op = record(Kernel::scale_, {});
  for (const Tensor& t : tensors) {
    depend_on(op, t);
    op.memory_bytes += 2.0 * static_cast<double>(t.bytes());
  }
  for (const Tensor& t : tensors) produced_by(t, recorder_->next_op() - 1);
}

MemoryEvent host_memory_peak(const Program& program) {
  MemoryEvent peak;
  int64_t held = 0;
  for (const MemoryEvent& event : program.host_memory) {
    held += event.bytes;
    if (held > peak.bytes) peak = {event.before_op, held};
  }
  return peak;
}

CommunicationBytes communication_bytes(OpKind kind, double input_bytes, int degree) {
  const double ring_fraction = static_cast<double>(degree - 1) / degree;
  switch (kind) {
    case OpKind::all_gather:
      return {input_bytes * degree, ring_fraction * input_bytes * degree};
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
      return {input_bytes, ring_fraction * input_bytes};
    case OpKind::all_reduce:
      return {input_bytes, 2 * ring_fraction * input_bytes};
    case OpKind::broadcast:
    case OpKind::reduce:
    case OpKind::send_recv:
      return {input_bytes, input_bytes};
    default:
      PARADYSE_CHECK(false, "communication_bytes of " + std::string(to_string(kind)));
  }
  return {};
}

Pending TracingBackend::communicate(OpKind kind, const Tensor& input, Tensor result, CommGroup group) {
  Op& op = record(kind, Kernel::communication, {&input});
  const RankSet ranks = ranks_of(group);
  const CommunicationBytes bytes = communication_bytes(kind, static_cast<double>(input.bytes()), ranks.size);
  op.size_bytes = bytes.size_bytes;
  op.bus_bytes = bytes.bus_bytes;
  op.group = group;
  op.group_first = static_cast<int16_t>(ranks.first);
  op.group_size = static_cast<int16_t>(ranks.size);
  op.group_stride = static_cast<int16_t>(ranks.stride);
  const OpId id = recorder_->next_op() - 1;
  if (result.defined()) produced_by(result, id);
  return Pending(this, id, std::move(result));
}

Tensor TracingBackend::wait(int64_t token, Tensor result) {
  if (token < 0) return result;  // nothing was communicated (a group of one)
  Op& op = record(Kernel::wait, {});
  op.deps.push_back(static_cast<OpId>(token));
  return result;
}

Pending TracingBackend::all_gather_over(CommGroup group, const Tensor& x, int dim) {
  const int size = ranks_of(group).size;
  if (size == 1) return Pending(this, -1, x);
  dim = normalize_dim(x, dim);
  Shape shape = x.shape();
  shape[static_cast<std::size_t>(dim)] *= size;
  return communicate(OpKind::all_gather, x, allocate(shape, x.dtype()), group);
}

Pending TracingBackend::reduce_scatter_over(CommGroup group, const Tensor& x, int dim) {
  const int size = ranks_of(group).size;
  if (size == 1) return Pending(this, -1, x);
  dim = normalize_dim(x, dim);
  PARADYSE_CHECK(x.size(dim) % size == 0, "reduce_scatter of " + to_string(x.shape()) + " over " +
                                              std::to_string(size) + " ranks along dim " +
                                              std::to_string(dim));
  Shape shape = x.shape();
  shape[static_cast<std::size_t>(dim)] /= size;
  return communicate(OpKind::reduce_scatter, x, allocate(shape, x.dtype()), group);
}

Pending TracingBackend::all_reduce_over(CommGroup group, const Tensor& x) {
  if (ranks_of(group).size == 1) return Pending(this, -1, x);
  return communicate(OpKind::all_reduce, x, x, group);  // in place
}

Pending TracingBackend::all_to_all_async(const Tensor& x, int split_dim, int concat_dim) {
  if (group_.size == 1) return Pending(this, -1, x);
  split_dim = normalize_dim(x, split_dim);
  concat_dim = normalize_dim(x, concat_dim);
  PARADYSE_CHECK(x.size(split_dim) % group_.size == 0,
                 "all_to_all of " + to_string(x.shape()) + " over " + std::to_string(group_.size) + " ranks");
  Shape shape = x.shape();
  shape[static_cast<std::size_t>(split_dim)] /= group_.size;
  shape[static_cast<std::size_t>(concat_dim)] *= group_.size;
  return communicate(OpKind::all_to_all, x, allocate(shape, x.dtype()));
}

Pending TracingBackend::broadcast_async(const Tensor& x, int root) {
  if (group_.size == 1) return Pending(this, -1, x);
  Pending pending = communicate(OpKind::broadcast, x, rank() == root ? x : allocate(x.shape(), x.dtype()));
  recorder_->program.ops.back().root = static_cast<int16_t>(root);
  return pending;
}

Pending TracingBackend::reduce_async(const Tensor& x, int root) {
  if (group_.size == 1) return Pending(this, -1, x);
  Pending pending = communicate(OpKind::reduce, x, rank() == root ? x : Tensor());  // in place
  recorder_->program.ops.back().root = static_cast<int16_t>(root);
  return pending;
}

Pending TracingBackend::send_recv_async(const Tensor& x, int to, int from) {
  PARADYSE_CHECK(to >= 0 && to < group_.size && from >= 0 && from < group_.size,
                 "send_recv peer outside the group");
  Pending pending = communicate(OpKind::send_recv, x, allocate(x.shape(), x.dtype()));
  Op& op = recorder_->program.ops.back();
  op.send_to = static_cast<int16_t>(to);
  op.recv_from = static_cast<int16_t>(from);
  return pending;
}

namespace {
// In Kernel's order.
}  // namespace

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::gemm:
      return "gemm";
    case OpKind::attention_forward:
      return "attention_forward";
    case OpKind::attention_backward:
      return "attention_backward";
    case OpKind::scores_gemm:
      return "scores_gemm";
    case OpKind::memory_bound:
      return "memory_bound";
    case OpKind::all_gather:
      return "all_gather";
    case OpKind::reduce_scatter:
      return "reduce_scatter";
    case OpKind::all_reduce:
      return "all_reduce";
    case OpKind::all_to_all:
      return "all_to_all";
    case OpKind::broadcast:
      return "broadcast";
    case OpKind::reduce:
      return "reduce";
    case OpKind::send_recv:
      return "send_recv";
    case OpKind::wait:
      return "wait";
    case OpKind::host_copy:
      return "host_copy";
  }
  return "?";
}

}  // namespace paradyse
