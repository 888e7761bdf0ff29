#include "real_backend/torch_backend.hpp"

#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "real_backend/device.hpp"
#include "real_backend/held_bytes.hpp"
#include "real_backend/host_allocator.hpp"
#include "real_backend/torch_tensor.hpp"
#include "real_backend/varlen_attention.hpp"

namespace paradyse::real {
namespace {

// Buffers held outside handles (optimizer state, communication buffers) count the same way.
class HeldTensors {
 public:
  HeldTensors(std::shared_ptr<HeldBytes> held, std::vector<at::Tensor> tensors) : held_(std::move(held)) {
    for (const at::Tensor& t : tensors) parts_.push_back(std::make_unique<TorchTensor>(t, held_));
  }

 private:
  std::shared_ptr<HeldBytes> held_;
  std::vector<std::unique_ptr<TorchTensor>> parts_;
};

at::IntArrayRef sizes(const Shape& shape) {
  return {shape.data(), shape.size()};
}

Shape shape_of(const at::Tensor& t) {
  return {t.sizes().begin(), t.sizes().end()};
}

int normalize_dim(const Tensor& x, int dim) {
  return dim < 0 ? dim + x.rank() : dim;
}

// Positions of a tensor's sequence dim as a tensor of global token indices.
at::Tensor positions(const Positions& ranges, const at::Device& device) {
  std::vector<at::Tensor> parts;
  for (const TokenRange& r : ranges)
    parts.push_back(at::arange(r.begin, r.begin + r.length, at::TensorOptions(at::kLong).device(device)));
  return at::cat(parts);
}

// The document of each position (a tensor of global token indices): the first whose end (`ends`, on
// the positions' device) lies beyond it.
at::Tensor documents_of(const at::Tensor& positions, const at::Tensor& ends) {
  return at::searchsorted(ends, positions, /*out_int32=*/false, /*right=*/true);
}

// Each token's position within its document, in the tensor's order (RotaryPositions). A tensor's
// ranges each lie within one document (SequenceLayout splits documents, never joins them).
std::vector<int64_t> positions_in_documents(const RotaryPositions& at) {
  std::vector<int64_t> out;
  for (const TokenRange& range : at.tokens) {
    int64_t start = 0;
    if (at.document_ends) {
      const DocumentEnds& ends = *at.document_ends;
      const auto end = std::upper_bound(ends.begin(), ends.end(), range.begin);  // the range's document's
      start = end == ends.begin() ? 0 : *(end - 1);
    }
    for (int64_t i = 0; i < range.length; ++i) out.push_back(range.begin + i - start);
  }
  return out;
}

// x [b, s, heads, d] rotated by `sign` times each token's angles (RotaryPositions): the pair (i, i + d/2)
// of each head by position · θ^(−2i/d), the position counted from the token's document's start.
at::Tensor rotate(const at::Tensor& x, const RotaryPositions& at, double sign) {
  const at::Device device = x.device();
  const at::Tensor position = on_device(positions_in_documents(at), device);
  const int64_t half = x.size(-1) / 2;
  const at::TensorOptions exact = at::TensorOptions(at::kDouble).device(device);
  const at::Tensor frequency =
      at::pow(at.theta, at::arange(half, exact) * (-2.0 / static_cast<double>(x.size(-1))));
  const at::Tensor angle =
      (position.to(at::kDouble).unsqueeze(1) * frequency.unsqueeze(0)).view({1, -1, 1, half});
  const at::Tensor cos = at::cos(angle).to(at::kFloat), sin = (sign * at::sin(angle)).to(at::kFloat);
  const at::Tensor t = x.to(at::kFloat), first = t.narrow(-1, 0, half), second = t.narrow(-1, half, half);
  return at::cat({first * cos - second * sin, second * cos + first * sin}, -1).to(x.scalar_type());
}

// Which (query, key) pairs a mask computes: within one document and, for a causal mask, key ≤ query.
// Kept as positions and documents, not as an [s_q, s_k] matrix: the exact attention asks for one tile
// at a time, and a whole matrix of a long sequence would be its largest buffer by far (a 1M-token
// sequence's is 2^40 bytes), one the traced programs and the memory check know nothing of.
class PairMask {
 public:
  PairMask(const AttentionMask& mask, const at::Device& device)
      : causal_(mask.causal), q_(positions(mask.queries, device)), k_(positions(mask.keys, device)) {
    if (mask.document_ends) {
      const at::Tensor ends = on_device(*mask.document_ends, device);
      q_document_ = documents_of(q_, ends);
      k_document_ = documents_of(k_, ends);
    }
  }

  // [n_q, n_k] of the query and key indices given (`keys` undefined: all keys).
  at::Tensor pairs(const at::Tensor& queries, const at::Tensor& keys) const {
    const auto pick = [](const at::Tensor& all, const at::Tensor& indices) {
      return indices.defined() ? all.index_select(0, indices) : all;
    };
    const at::Tensor q = pick(q_, queries), k = pick(k_, keys);
    at::Tensor allowed = causal_ ? k.unsqueeze(0) <= q.unsqueeze(1)
                                 : at::ones({q.size(0), k.size(0)}, q.options().dtype(at::kBool));
    if (q_document_.defined())
      allowed.logical_and_(pick(k_document_, keys).unsqueeze(0) == pick(q_document_, queries).unsqueeze(1));
    return allowed;
  }

 private:
  bool causal_;
  at::Tensor q_, k_, q_document_, k_document_;
};

// Queries per block of the exact attention: its fp32 score block stays under `block_bytes`.
int64_t query_block(int64_t batch_heads, int64_t keys, int64_t block_bytes) {
  const int64_t floats = block_bytes / static_cast<int64_t>(sizeof(float));
  return std::max<int64_t>(1, floats / std::max<int64_t>(1, batch_heads * keys));
}

// A piece of the exact attention: some queries against some keys (int64 indices into q's and k's
// sequence dims; `keys` undefined: all of them).
struct AttentionTile {
  at::Tensor queries, keys;
};

// Blocks of queries against every key; with documents, each document's queries (in blocks) against
// that document's keys alone, as a variable-length kernel runs: pairs across documents cost nothing.
std::vector<AttentionTile> attention_tiles(const AttentionMask& mask, int64_t batch_heads,
                                           const at::Device& device, int64_t block_bytes) {
  const at::TensorOptions indices = at::TensorOptions(at::kLong).device(device);
  std::vector<std::pair<at::Tensor, at::Tensor>> groups;  // (queries, keys) of one document, or of all
  if (!mask.document_ends) {
    groups.emplace_back(at::arange(mask.query_count(), indices), at::Tensor());
  } else {
    const at::Tensor ends = on_device(*mask.document_ends, device);
    const at::Tensor q_document = documents_of(positions(mask.queries, device), ends);
    const at::Tensor k_document = documents_of(positions(mask.keys, device), ends);
    const at::Tensor documents = std::get<0>(at::_unique2(q_document)).cpu();
    for (int64_t i = 0; i < documents.numel(); ++i) {
      const int64_t document = documents[i].item<int64_t>();
      const at::Tensor keys = at::nonzero(k_document == document).view({-1});
      if (keys.numel() == 0) continue;  // no key of this document here: its rows stay empty
      groups.emplace_back(at::nonzero(q_document == document).view({-1}), keys);
    }
  }
  std::vector<AttentionTile> tiles;
  for (const auto& [queries, keys] : groups) {
    const int64_t key_count = keys.defined() ? keys.numel() : mask.key_count();
    const int64_t block = query_block(batch_heads, key_count, block_bytes);
    for (int64_t start = 0; start < queries.numel(); start += block)
      tiles.push_back({queries.narrow(0, start, std::min(block, queries.numel() - start)), keys});
  }
  return tiles;
}

// The tile's keys (or values) of [b, heads, s_k, d].
at::Tensor tile_keys(const at::Tensor& heads, const AttentionTile& tile) {
  return tile.keys.defined() ? heads.index_select(2, tile.keys) : heads;
}

// q [b, s_q, a, d] → [b, a_kv, g·s_q, d] (fp32): query head i = kv head i / g, so each kv head's
// query group is contiguous and one batched GEMM against [b, a_kv, s_k, d] serves all of it.
at::Tensor grouped_queries(const at::Tensor& q, int64_t kv_heads) {
  const int64_t b = q.size(0), s = q.size(1), a = q.size(2), d = q.size(3);
  return q.permute({0, 2, 1, 3}).to(at::kFloat).reshape({b, kv_heads, (a / kv_heads) * s, d});
}

at::Tensor heads_first(const at::Tensor& k) {  // [b, s, heads, d] → [b, heads, s, d] fp32
  return k.permute({0, 2, 1, 3}).to(at::kFloat);
}

// Scaled scores of grouped queries against keys with the mask applied: [b, a_kv, g, s_q, s_k].
at::Tensor masked_scores(const at::Tensor& q_grouped, const at::Tensor& k_heads, const at::Tensor& allowed,
                         int64_t group, double scale) {
  const int64_t b = q_grouped.size(0), kv = q_grouped.size(1), sq = allowed.size(0), sk = allowed.size(1);
  at::Tensor s = at::matmul(q_grouped, k_heads.transpose(-1, -2)).mul_(scale).view({b, kv, group, sq, sk});
  return s.masked_fill_(allowed.logical_not(), -std::numeric_limits<float>::infinity());
}

// exp(s − lse) with rows of lse = −inf (no key allowed) giving 0, not NaN.
at::Tensor probabilities(const at::Tensor& scores, const at::Tensor& lse) {
  const at::Tensor finite = at::where(at::isinf(lse), at::zeros_like(lse), lse);
  return at::exp(scores - finite.unsqueeze(-1));
}

}  // namespace

// LibTorch's fused Adam (one kernel a tensor, as PyTorch's Adam(fused=True) runs it, on CPUs since 2.4):
// the update the tracer prices as one call. Older LibTorch runs it op by op.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define PARADYSE_FUSED_ADAM 1
#endif

struct TorchBackend::AdamState {
  at::Tensor master;  // fp32 weights when storage is bf16; undefined when the weight is fp32 already
  at::Tensor m, v;
  int64_t step = 0;            // steps taken (op by op)
  at::Tensor fused_step;       // steps taken (the fused kernel's), an fp32 scalar on the device
  std::shared_ptr<void> held;  // counts master, m and v in HeldBytes
};

// Times one backend call when profiling, by stamps of the backend's DeviceClock around it.
class TorchBackend::OpTimer {
 public:
  // Named as the tracer names the op: its backend call, or for a collective its kind.
  OpTimer(TorchBackend& be, Kernel kernel) : OpTimer(be, to_string(kernel)) {}
  OpTimer(TorchBackend& be, OpKind kind) : OpTimer(be, to_string(kind)) {}
  OpTimer(TorchBackend& be, std::string_view op) : be_(be), op_(op) {
    if (be_.options_.profile_ops) start_ = be_.clock_.stamp();
  }
  ~OpTimer() {
    if (be_.options_.profile_ops)
      be_.op_stamps_.push_back({be_.phase_, be_.layer_, be_.label_, op_, start_, be_.clock_.stamp()});
  }

 private:
  TorchBackend& be_;
  std::string_view op_;
  DeviceClock::Stamp start_ = 0;
};

TorchBackend::TorchBackend(Communicator& communicator, const ModelSpec& model, TorchBackendOptions options)
    : job_(communicator),
      group_(&communicator),
      model_(model),
      options_(options),
      weights_(model, options.weight_seed),
      dropout_generator_(make_generator(
          options.device, options.weight_seed * 7919 + static_cast<uint64_t>(communicator.rank()))),
      replicated_dropout_generator_(make_generator(options.device, options.weight_seed * 7919 - 1)),
      clock_(options.device),
      start_time_(std::chrono::steady_clock::now()) {
  HostAllocator::install();
  offload_ = std::make_unique<ActivationOffload>(options_.device, held_);
}

TorchBackend::~TorchBackend() {
  // A step abandoned by an exception may leave communications in flight; their buffers must outlive
  // them, and waiting on a failed group throws again, so they are dropped without waiting.
  for (auto& [token, flight] : in_flight_) new InFlight(std::move(flight));  // leaked on purpose
}

at::ScalarType TorchBackend::storage_type(DType dtype) const {
  switch (dtype) {
    case DType::bf16:
      return options_.precision == Precision::fp32 ? at::kFloat : at::kBFloat16;
    case DType::fp32:
      return at::kFloat;
    case DType::int64:
      return at::kLong;
    case DType::u8:
      return at::kByte;
  }
  return at::kFloat;
}

at::TensorOptions TorchBackend::options(DType dtype) const {
  return at::TensorOptions(storage_type(dtype)).device(options_.device);
}

Tensor TorchBackend::make(const at::Tensor& t, DType dtype) const {
  auto handle = std::make_shared<TorchTensor>(t, held_);
  offload_->made(handle);
  return Tensor(shape_of(t), dtype, std::move(handle));
}

Tensor TorchBackend::wrap(const at::Tensor& t, DType dtype) {
  return make(t.to(options(dtype)), dtype);
}

const at::Tensor& TorchBackend::unwrap(const Tensor& t) {
  return t.impl<TorchTensor>().t;
}

void TorchBackend::clear_records() {
  calls_.clear();
  op_stamps_.clear();
  phase_stamps_.clear();
  clock_.restart();
}

std::vector<OpTiming> TorchBackend::ops_timed() const {
  std::vector<OpTiming> ops;
  for (const OpStamps& op : op_stamps_)
    ops.push_back({op.phase, op.layer, op.label, op.op, clock_.seconds(op.end) - clock_.seconds(op.start)});
  return ops;
}

std::vector<PhaseTiming> TorchBackend::phases_timed() const {
  std::vector<PhaseTiming> phases;
  for (const PhaseStamp& p : phase_stamps_)
    phases.push_back({p.phase, p.layer, clock_.seconds(p.start), p.live_bytes});
  return phases;
}

double TorchBackend::seconds_since_start() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_).count();
}

void TorchBackend::synchronize() const {
  real::synchronize(options_.device);
}

void TorchBackend::begin_phase(Phase phase, int layer, Rerun) {
  phase_ = phase;
  layer_ = layer;
  phase_stamps_.push_back({phase, layer, clock_.stamp(), held_->current()});
}

void TorchBackend::label(std::string_view name) {
  label_ = name;
}

Tensor TorchBackend::parameter(std::string_view name, const Shape& shape, int shard) {
  Tensor weight = wrap(weights_.shard(name, shape, shard, shard_degree()), DType::bf16);
  // The optimizer state exists from the start, as the static memory terms count it (18 bytes a
  // parameter with the bf16 weight and the fp32 main gradient).
  auto state = std::make_unique<AdamState>();
  const at::Tensor& w = unwrap(weight);
  if (w.scalar_type() != at::kFloat) state->master = w.to(at::kFloat);
  state->m = at::zeros(w.sizes(), options(DType::fp32));
  state->v = at::zeros(w.sizes(), options(DType::fp32));
  std::vector<at::Tensor> held{state->m, state->v};
  if (state->master.defined()) held.push_back(state->master);
  state->held = std::make_shared<HeldTensors>(held_, held);
  adam_[weight.shared_impl().get()] = std::move(state);
  return weight;
}

Tensor TorchBackend::gradient_buffer(const Shape& shape) {
  return zeros(shape, DType::fp32);
}

Tensor TorchBackend::zeros(const Shape& shape, DType dtype) {
  OpTimer timer(*this, Kernel::zeros);
  return make(at::zeros(sizes(shape), options(dtype)), dtype);
}

Tensor TorchBackend::view(const Tensor& x, const Shape& shape) {
  // A view must share storage (strategies add into views of buffers), so no reshape's silent copy.
  return make(unwrap(x).view(sizes(shape)), x.dtype());
}

Tensor TorchBackend::slice(const Tensor& x, int dim, int64_t start, int64_t length) {
  return make(unwrap(x).narrow(normalize_dim(x, dim), start, length), x.dtype());
}

Tensor TorchBackend::concat(const std::vector<Tensor>& parts, int dim) {
  OpTimer timer(*this, Kernel::concat);
  PARADYSE_CHECK(!parts.empty(), "concat of nothing");
  std::vector<at::Tensor> tensors;
  for (const Tensor& part : parts) tensors.push_back(unwrap(part));
  return make(at::cat(tensors, normalize_dim(parts[0], dim)), parts[0].dtype());
}

Tensor TorchBackend::cast(const Tensor& x, DType dtype) {
  OpTimer timer(*this, Kernel::cast);
  return make(unwrap(x).to(storage_type(dtype), /*non_blocking=*/false, /*copy=*/true), dtype);
}

namespace {
// GEMM operands in one type: the activation's (a strategy casts before its GEMMs; this only
// matters for an fp32 accumulator meeting bf16 weights).
at::Tensor like(const at::Tensor& t, const at::Tensor& reference) {
  return t.scalar_type() == reference.scalar_type() ? t : t.to(reference.scalar_type());
}
}  // namespace

Tensor TorchBackend::linear(const Tensor& x, const Tensor& w) {
  OpTimer timer(*this, Kernel::linear);
  const at::Tensor& a = unwrap(x);
  return make(at::matmul(a, like(unwrap(w), a).t()), DType::bf16);
}

Tensor TorchBackend::matmul(const Tensor& x, const Tensor& w) {
  OpTimer timer(*this, Kernel::matmul);
  const at::Tensor& a = unwrap(x);
  return make(at::matmul(a, like(unwrap(w), a)), DType::bf16);
}

Tensor TorchBackend::weight_grad(const Tensor& a, const Tensor& b) {
  OpTimer timer(*this, Kernel::weight_grad);
  const at::Tensor& left = unwrap(a);
  const at::Tensor right = like(unwrap(b), left);
  return make(at::mm(left.reshape({-1, left.size(-1)}).t(), right.reshape({-1, right.size(-1)})),
              DType::bf16);
}

namespace {

// The exact attention of q [b, s_q, a, d] against k and v [b, s_k, kv, d] under `mask`, on their
// device: out [b, s_q, a, d] and lse [b, a, s_q], float32.
std::pair<at::Tensor, at::Tensor> exact_attention_forward(const at::Tensor& tq, const at::Tensor& tk,
                                                          const at::Tensor& tv, const AttentionMask& mask,
                                                          int64_t block_bytes) {
  const int64_t b = tq.size(0), sq = tq.size(1), a = tq.size(2), d = tq.size(3), kv = tk.size(2), g = a / kv;
  const at::Device device = tq.device();
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor k_heads = heads_first(tk), v_heads = heads_first(tv);
  const PairMask allowed(mask, device);
  // Rows no tile reaches (a document with no key here) stay empty: output 0, log-sum-exp −inf.
  at::Tensor out = at::zeros({b, kv, g, sq, d}, at::TensorOptions(at::kFloat).device(device));
  at::Tensor lse = at::full({b, kv, g, sq}, -std::numeric_limits<float>::infinity(), out.options());
  for (const AttentionTile& tile : attention_tiles(mask, b * a, device, block_bytes)) {
    const int64_t n = tile.queries.numel();
    const at::Tensor qb = grouped_queries(tq.index_select(1, tile.queries), kv);
    const at::Tensor s =
        masked_scores(qb, tile_keys(k_heads, tile), allowed.pairs(tile.queries, tile.keys), g, scale);
    const at::Tensor row_lse = at::logsumexp(s, -1);  // [b, kv, g, n]
    const at::Tensor p = probabilities(s, row_lse).view({b, kv, g * n, -1});
    out.index_copy_(3, tile.queries, at::matmul(p, tile_keys(v_heads, tile)).view({b, kv, g, n, d}));
    lse.index_copy_(3, tile.queries, row_lse);
  }
  // [b, kv, g, s, d] is [b, a, s, d] with a = kv·g: back to [b, s, a, d].
  return {out.view({b, a, sq, d}).permute({0, 2, 1, 3}), lse.view({b, a, sq})};
}

// Its gradients from d_out and the forward's out and lse: d_q, d_k, d_v float32, shaped as q, k, v.
std::tuple<at::Tensor, at::Tensor, at::Tensor> exact_attention_backward(
    const at::Tensor& d_out, const at::Tensor& tq, const at::Tensor& tk, const at::Tensor& tv,
    const at::Tensor& out, const at::Tensor& lse, const AttentionMask& mask, int64_t block_bytes) {
  const int64_t b = tq.size(0), sq = tq.size(1), a = tq.size(2), d = tq.size(3), kv = tk.size(2), g = a / kv;
  const at::Device device = tq.device();
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor k_heads = heads_first(tk), v_heads = heads_first(tv);
  const PairMask allowed(mask, device);
  const at::Tensor lse_grouped = lse.view({b, kv, g, sq});
  // D = rowsum(dO ∘ O): the softmax backward's correction, FlashAttention's "delta".
  const at::Tensor delta =
      (d_out.to(at::kFloat) * out.to(at::kFloat)).sum(-1).permute({0, 2, 1}).reshape({b, kv, g, sq});
  at::Tensor d_q = at::zeros({b, kv, g, sq, d}, at::TensorOptions(at::kFloat).device(device));
  at::Tensor d_k = at::zeros({b, kv, tk.size(1), d}, d_q.options());
  at::Tensor d_v = at::zeros_like(d_k);
  for (const AttentionTile& tile : attention_tiles(mask, b * a, device, block_bytes)) {
    const int64_t n = tile.queries.numel();
    const at::Tensor qb = grouped_queries(tq.index_select(1, tile.queries), kv);      // [b, kv, g·n, d]
    const at::Tensor dob = grouped_queries(d_out.index_select(1, tile.queries), kv);  // [b, kv, g·n, d]
    const at::Tensor k_tile = tile_keys(k_heads, tile);
    const at::Tensor s = masked_scores(qb, k_tile, allowed.pairs(tile.queries, tile.keys), g, scale);
    const at::Tensor p = probabilities(s, lse_grouped.index_select(3, tile.queries)).view({b, kv, g * n, -1});
    const at::Tensor d_p = at::matmul(dob, tile_keys(v_heads, tile).transpose(-1, -2));  // [b, kv, g·n, s_k]
    const at::Tensor d_s = (p * (d_p - delta.index_select(3, tile.queries).reshape({b, kv, g * n, 1})))
                               .mul_(scale);  // of the raw q·kᵀ
    d_q.index_copy_(3, tile.queries, at::matmul(d_s, k_tile).view({b, kv, g, n, d}));
    const at::Tensor d_k_tile = at::matmul(d_s.transpose(-1, -2), qb),
                     d_v_tile = at::matmul(p.transpose(-1, -2), dob);
    if (tile.keys.defined()) {
      d_k.index_add_(2, tile.keys, d_k_tile);
      d_v.index_add_(2, tile.keys, d_v_tile);
    } else {
      d_k.add_(d_k_tile);
      d_v.add_(d_v_tile);
    }
  }
  return {d_q.view({b, a, sq, d}).permute({0, 2, 1, 3}), d_k.permute({0, 2, 1, 3}),
          d_v.permute({0, 2, 1, 3})};
}

// The exact attention as a variable-length kernel: each packed sequence on its own.
VarlenKernels exact_varlen_kernels() {
  const auto each = [](const VarlenCall& c, const auto& body) {
    int64_t q_row = 0, k_row = 0;
    for (std::size_t i = 0; i < c.q_lengths.size(); ++i) {
      const int64_t nq = c.q_lengths[i], nk = c.k_lengths[i];
      const AttentionMask mask{c.causal, {TokenRange{0, nq}}, {TokenRange{0, nk}}, nullptr};
      body(mask, q_row, nq, k_row, nk);
      q_row += nq;
      k_row += nk;
    }
  };
  const auto one = [](const at::Tensor& rows, int64_t start, int64_t n) {  // [n, heads, d] → [1, n, heads, d]
    return rows.narrow(0, start, n).unsqueeze(0);
  };
  VarlenKernels kernels;
  kernels.forward = [each, one](const VarlenCall& c) {
    std::vector<at::Tensor> outs, lses;
    each(c, [&](const AttentionMask& mask, int64_t q_row, int64_t nq, int64_t k_row, int64_t nk) {
      auto [out, lse] = exact_attention_forward(one(c.q, q_row, nq), one(c.k, k_row, nk), one(c.v, k_row, nk),
                                                mask, TorchBackendOptions{}.attention_block_bytes);
      outs.push_back(out.squeeze(0));
      lses.push_back(lse.squeeze(0));
    });
    return VarlenForward{at::cat(outs, 0).to(c.q.scalar_type()), at::cat(lses, 1)};
  };
  kernels.backward = [each, one](const VarlenCall& c, const at::Tensor& d_out, const VarlenForward& merged) {
    std::vector<at::Tensor> d_qs, d_ks, d_vs;
    each(c, [&](const AttentionMask& mask, int64_t q_row, int64_t nq, int64_t k_row, int64_t nk) {
      auto [d_q, d_k, d_v] = exact_attention_backward(
          one(d_out, q_row, nq), one(c.q, q_row, nq), one(c.k, k_row, nk), one(c.v, k_row, nk),
          one(merged.out, q_row, nq), merged.lse.narrow(1, q_row, nq).unsqueeze(0), mask,
          TorchBackendOptions{}.attention_block_bytes);
      d_qs.push_back(d_q.squeeze(0));
      d_ks.push_back(d_k.squeeze(0));
      d_vs.push_back(d_v.squeeze(0));
    });
    return VarlenGrads{at::cat(d_qs, 0), at::cat(d_ks, 0), at::cat(d_vs, 0)};
  };
  return kernels;
}

}  // namespace

const VarlenKernels* TorchBackend::varlen_kernels(const at::Tensor& q) const {
  if (!options_.varlen_attention.value_or(options_.device.is_cuda())) return nullptr;
  static const std::optional<VarlenKernels> flash = flash_kernels();
  static const VarlenKernels exact = exact_varlen_kernels();
  const int64_t d = q.size(-1);
  const bool flash_runs = flash && q.is_cuda() && q.scalar_type() == at::kBFloat16 && d % 8 == 0 && d <= 256;
  return flash_runs ? &*flash : &exact;
}

AttentionOutput TorchBackend::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                const AttentionMask& mask) {
  OpTimer timer(*this, Kernel::attention_forward);
  const at::Tensor &tq = unwrap(q), &tk = unwrap(k), &tv = unwrap(v);
  const at::ScalarType type = storage_type(DType::bf16);
  if (const VarlenKernels* kernels = varlen_kernels(tq))
    if (const auto tiles = varlen_tiles(mask)) {
      const VarlenForward f = tiled_attention_forward(
          tq, tk, tv, *tiles, 1.0 / std::sqrt(static_cast<double>(q.size(3))), *kernels);
      return {make(f.out.to(type), DType::bf16), make(f.lse, DType::fp32)};
    }
  auto [out, lse] = exact_attention_forward(tq, tk, tv, mask, options_.attention_block_bytes);
  return {make(out.to(type).contiguous(), DType::bf16), make(lse, DType::fp32)};
}

AttentionGrads TorchBackend::attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k,
                                                const Tensor& v, const Tensor& out, const Tensor& lse,
                                                const AttentionMask& mask) {
  OpTimer timer(*this, Kernel::attention_backward);
  const at::Tensor &tq = unwrap(q), &tk = unwrap(k), &tv = unwrap(v);
  const at::ScalarType type = storage_type(DType::bf16);
  if (const VarlenKernels* kernels = varlen_kernels(tq))
    if (const auto tiles = varlen_tiles(mask)) {
      const VarlenGrads g =
          tiled_attention_backward(unwrap(d_out), tq, tk, tv, unwrap(out), unwrap(lse), *tiles,
                                   1.0 / std::sqrt(static_cast<double>(q.size(3))), *kernels);
      return {make(g.d_q.to(type), DType::bf16), make(g.d_k.to(type), DType::bf16),
              make(g.d_v.to(type), DType::bf16)};
    }
  auto [d_q, d_k, d_v] = exact_attention_backward(unwrap(d_out), tq, tk, tv, unwrap(out), unwrap(lse), mask,
                                                  options_.attention_block_bytes);
  return {make(d_q.to(type).contiguous(), DType::bf16), make(d_k.to(type).contiguous(), DType::bf16),
          make(d_v.to(type).contiguous(), DType::bf16)};
}

void TorchBackend::merge_attention(Tensor& out, Tensor& lse, const AttentionOutput& block) {
  OpTimer timer(*this, Kernel::merge_attention);
  at::Tensor o = unwrap(out), l = unwrap(lse);
  const at::Tensor bo = unwrap(block.out), bl = unwrap(block.lse);
  const LseMerge merged = merge_lse(l, bl);
  const auto as_out = [](const at::Tensor& weight) {
    return weight.permute({0, 2, 1}).unsqueeze(-1);
  };  // [b, a, s] → [b, s, a, 1]
  o.copy_(o.to(at::kFloat) * as_out(merged.weight_a) + bo.to(at::kFloat) * as_out(merged.weight_b));
  l.copy_(merged.lse);
}

Tensor TorchBackend::scores(const Tensor& q, const Tensor& k) {
  OpTimer timer(*this, Kernel::scores);
  return make(at::matmul(unwrap(q).permute({0, 2, 1, 3}), unwrap(k).permute({0, 2, 3, 1})), DType::bf16);
}

// The probabilities a ring strategy multiplies are often a key block sliced from a row (strided);
// LibTorch's CPU batched GEMM on strided bf16 operands takes a path several times slower than on
// contiguous ones (colossal_z at 2048 tokens: 20 ms against 2.5 ms per call), so they are made
// contiguous first, as a GPU's strided-batched GEMM reads them without a copy.
Tensor TorchBackend::scores_times(const Tensor& p, const Tensor& v) {
  OpTimer timer(*this, Kernel::scores_times);
  const at::Tensor probs = unwrap(p).contiguous();
  return make(
      at::matmul(probs, like(unwrap(v), probs).permute({0, 2, 1, 3})).permute({0, 2, 1, 3}).contiguous(),
      DType::bf16);
}

Tensor TorchBackend::scores_transposed_times(const Tensor& p, const Tensor& x) {
  OpTimer timer(*this, Kernel::scores_transposed_times);
  const at::Tensor probs = unwrap(p).contiguous();  // as in scores_times
  return make(at::matmul(probs.transpose(-1, -2), like(unwrap(x), probs).permute({0, 2, 1, 3}))
                  .permute({0, 2, 1, 3})
                  .contiguous(),
              DType::bf16);
}

Tensor TorchBackend::softmax(const Tensor& scores, double scale, const AttentionMask& mask) {
  OpTimer timer(*this, Kernel::softmax);
  const at::Tensor allowed = PairMask(mask, options_.device).pairs(at::Tensor(), at::Tensor());
  const at::Tensor s = (unwrap(scores).to(at::kFloat) * scale)
                           .masked_fill_(allowed.logical_not(), -std::numeric_limits<float>::infinity());
  return make(at::softmax(s, -1).to(storage_type(DType::bf16)), DType::bf16);
}

Tensor TorchBackend::softmax_backward(const Tensor& d_probs, const Tensor& probs, double scale) {
  OpTimer timer(*this, Kernel::softmax_backward);
  const at::Tensor p = unwrap(probs).to(at::kFloat), dp = unwrap(d_probs).to(at::kFloat);
  const at::Tensor d_s = p * (dp - (dp * p).sum(-1, true)) * scale;
  return make(d_s.to(storage_type(DType::bf16)), DType::bf16);
}

namespace {
constexpr double kNormEpsilon = 1e-5;
}

NormOutput TorchBackend::norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      NormKind kind) {
  OpTimer timer(*this, Kernel::norm_forward);
  const at::Tensor xf = unwrap(x).to(at::kFloat);
  const at::Tensor g = unwrap(gamma).to(at::kFloat);
  const int64_t rows = x.numel() / x.size(-1);
  at::Tensor y, stats;
  if (kind == NormKind::layer_norm) {
    const at::Tensor mean = xf.mean(-1, true);
    const at::Tensor rstd = at::rsqrt((xf - mean).pow(2).mean(-1, true) + kNormEpsilon);
    y = (xf - mean) * rstd * g + unwrap(beta).to(at::kFloat);
    stats = at::cat({mean.reshape({rows, 1}), rstd.reshape({rows, 1})}, 1);
  } else {
    const at::Tensor rms = at::rsqrt(xf.pow(2).mean(-1, true) + kNormEpsilon);
    y = xf * rms * g;
    stats = rms.reshape({rows, 1});
  }
  return {make(y.to(storage_type(DType::bf16)), DType::bf16), make(stats, DType::fp32)};
}

NormGrads TorchBackend::norm_backward(const Tensor& d_y, const Tensor& x, const Tensor& gamma,
                                      const NormOutput& saved, NormKind kind) {
  OpTimer timer(*this, Kernel::norm_backward);
  const int64_t h = x.size(-1);
  const at::Tensor xf = unwrap(x).to(at::kFloat).reshape({-1, h});
  const at::Tensor dy = unwrap(d_y).to(at::kFloat).reshape({-1, h});
  const at::Tensor g = unwrap(gamma).to(at::kFloat);
  const at::Tensor& stats = unwrap(saved.stats);
  NormGrads grads;
  at::Tensor d_x;
  if (kind == NormKind::layer_norm) {
    const at::Tensor mean = stats.narrow(1, 0, 1), rstd = stats.narrow(1, 1, 1);
    const at::Tensor x_hat = (xf - mean) * rstd;
    const at::Tensor d_hat = dy * g;
    d_x = rstd * (d_hat - d_hat.mean(-1, true) - x_hat * (d_hat * x_hat).mean(-1, true));
    grads.d_gamma = make((dy * x_hat).sum(0), DType::fp32);
    grads.d_beta = make(dy.sum(0), DType::fp32);
  } else {
    const at::Tensor& rms = stats;
    const at::Tensor d_hat = dy * g;
    d_x = rms * (d_hat - xf * rms.pow(2) * (d_hat * xf).mean(-1, true));
    grads.d_gamma = make((dy * xf * rms).sum(0), DType::fp32);
  }
  grads.d_x = make(d_x.view(sizes(x.shape())).to(storage_type(DType::bf16)), DType::bf16);
  return grads;
}

Tensor TorchBackend::gelu(const Tensor& x) {
  OpTimer timer(*this, Kernel::gelu);
  return make(at::gelu(unwrap(x), "tanh"), DType::bf16);
}

Tensor TorchBackend::gelu_backward(const Tensor& d_y, const Tensor& x) {
  OpTimer timer(*this, Kernel::gelu_backward);
  const at::Tensor& input = unwrap(x);
  return make(at::gelu_backward(like(unwrap(d_y), input), input, "tanh"), DType::bf16);
}

Tensor TorchBackend::swiglu(const Tensor& x) {
  OpTimer timer(*this, Kernel::swiglu);
  const at::Tensor& t = unwrap(x);
  const int64_t f = x.size(-1) / 2;
  return make(at::silu(t.narrow(-1, 0, f)) * t.narrow(-1, f, f), DType::bf16);
}

Tensor TorchBackend::swiglu_backward(const Tensor& d_y, const Tensor& x) {
  OpTimer timer(*this, Kernel::swiglu_backward);
  const at::Tensor& t = unwrap(x);
  const int64_t f = x.size(-1) / 2;
  const at::Tensor gate = t.narrow(-1, 0, f).to(at::kFloat), up = t.narrow(-1, f, f).to(at::kFloat);
  const at::Tensor dy = unwrap(d_y).to(at::kFloat);
  const at::Tensor sig = at::sigmoid(gate);
  const at::Tensor d_gate = dy * up * sig * (1 + gate * (1 - sig));  // d silu(g)/dg = σ(g)(1 + g(1 − σ(g)))
  return make(at::cat({d_gate, dy * gate * sig}, -1).to(storage_type(DType::bf16)), DType::bf16);
}

Tensor TorchBackend::rotary(const Tensor& x, const RotaryPositions& at) {
  OpTimer timer(*this, Kernel::rotary);
  return make(rotate(unwrap(x), at, 1.0), DType::bf16);
}

// The rotation's transpose is the rotation by the opposite angles.
Tensor TorchBackend::rotary_backward(const Tensor& d_y, const RotaryPositions& at) {
  OpTimer timer(*this, Kernel::rotary_backward);
  return make(rotate(unwrap(d_y), at, -1.0), DType::bf16);
}

DropoutOutput TorchBackend::dropout(const Tensor& x, double probability, MaskStream stream) {
  OpTimer timer(*this, Kernel::dropout);
  const at::Tensor& t = unwrap(x);
  at::Generator& generator =
      stream == MaskStream::replicated ? replicated_dropout_generator_ : dropout_generator_;
  const at::Tensor keep = at::bernoulli(
      at::full(t.sizes(), 1 - probability, at::TensorOptions(at::kFloat).device(options_.device)), generator);
  return {make(t * keep.to(t.scalar_type()) / (1 - probability), DType::bf16),
          make(keep.to(at::kByte), DType::u8)};
}

Tensor TorchBackend::dropout_backward(const Tensor& d_y, const Tensor& mask, double probability) {
  OpTimer timer(*this, Kernel::dropout_backward);
  const at::Tensor& dy = unwrap(d_y);
  return make(dy * unwrap(mask).to(dy.scalar_type()) / (1 - probability), DType::bf16);
}

Tensor TorchBackend::add(const Tensor& a, const Tensor& b) {
  OpTimer timer(*this, Kernel::add);
  PARADYSE_CHECK(a.shape() == b.shape(), "add " + to_string(a.shape()) + " + " + to_string(b.shape()));
  return make(unwrap(a) + unwrap(b), a.dtype());
}

void TorchBackend::add_(Tensor& accumulator, const Tensor& x) {
  OpTimer timer(*this, Kernel::add_);
  PARADYSE_CHECK(accumulator.numel() == x.numel(),
                 "add_ " + to_string(accumulator.shape()) + " += " + to_string(x.shape()));
  at::Tensor acc = unwrap(accumulator);
  acc.add_(unwrap(x).reshape(acc.sizes()));
}

namespace {
// A vocabulary shard's view of token ids: ids relative to its first row, clamped into it (so that
// they index it), and whether each id is one of its rows (padding, below 0, never is).
struct ShardTokens {
  at::Tensor rows;    // int64, in [0, shard rows)
  at::Tensor inside;  // bool
};
ShardTokens shard_tokens(const at::Tensor& tokens, int64_t first_row, int64_t rows) {
  const at::Tensor local = tokens - first_row;
  const at::Tensor inside = (local >= 0).logical_and(local < rows).logical_and(tokens >= 0);
  return {local.clamp(0, rows - 1), inside};
}
}  // namespace

Tensor TorchBackend::embedding(const Tensor& tokens, const Tensor& table, int64_t first_row) {
  OpTimer timer(*this, Kernel::embedding);
  const at::Tensor& w = unwrap(table);
  const ShardTokens shard = shard_tokens(unwrap(tokens), first_row, w.size(0));
  at::Tensor y = at::embedding(w, shard.rows);
  y.masked_fill_(shard.inside.logical_not().unsqueeze(-1), 0);
  return make(y, DType::bf16);
}

Tensor TorchBackend::embedding_backward(const Tensor& d_y, const Tensor& tokens, int64_t rows,
                                        int64_t first_row) {
  OpTimer timer(*this, Kernel::embedding_backward);
  const int64_t h = d_y.size(-1);
  const ShardTokens shard = shard_tokens(unwrap(tokens).reshape({-1}), first_row, rows);
  at::Tensor d_table = at::zeros({rows, h}, options(DType::bf16));
  // Tokens outside the rows add zeros (to a row they were clamped to): no data-dependent shapes.
  d_table.index_add_(0, shard.rows, unwrap(d_y).reshape({-1, h}) * shard.inside.unsqueeze(-1));
  return make(d_table, DType::bf16);
}

LossOutput TorchBackend::cross_entropy(const Tensor& logits, const Tensor& targets) {
  OpTimer timer(*this, Kernel::cross_entropy);
  const at::Tensor z = unwrap(logits).to(at::kFloat);
  const at::Tensor t = unwrap(targets);
  // Targets below zero are padding: no loss, no gradient.
  const at::Tensor valid = (t >= 0).unsqueeze(-1).to(at::kFloat);
  const at::Tensor index = t.clamp_min(0).unsqueeze(-1);
  const at::Tensor lse = at::logsumexp(z, -1, true);
  const at::Tensor loss = ((lse - z.gather(-1, index)) * valid).sum().reshape({1});
  at::Tensor d = at::exp(z - lse);
  d.scatter_add_(-1, index, -at::ones_like(index, at::kFloat));
  return loss_output(loss, d * valid, logits.dtype());
}

LossOutput TorchBackend::loss_output(const at::Tensor& loss, const at::Tensor& d_logits,
                                     DType logits_dtype) const {
  return {make(loss, DType::fp32), make(d_logits.to(storage_type(logits_dtype)), logits_dtype)};
}

Tensor TorchBackend::logits_max(const Tensor& logits) {
  OpTimer timer(*this, Kernel::cross_entropy);
  return make(at::amax(unwrap(logits), -1, true).to(at::kFloat), DType::fp32);
}

Tensor TorchBackend::vocabulary_shard_sums(const Tensor& logits, const Tensor& targets, int64_t first_row,
                                           const Tensor& maxima) {
  OpTimer timer(*this, Kernel::cross_entropy);
  const at::Tensor z = unwrap(logits).to(at::kFloat);
  const at::Tensor m = at::amax(unwrap(maxima), -1, true);  // [b, c, 1]: the row's largest logit
  const ShardTokens shard = shard_tokens(unwrap(targets), first_row, z.size(-1));
  const at::Tensor target = (z.gather(-1, shard.rows.unsqueeze(-1)) - m) * shard.inside.unsqueeze(-1);
  return make(at::cat({at::exp(z - m).sum(-1, true), target}, -1), DType::fp32);
}

LossOutput TorchBackend::vocabulary_shard_loss(const Tensor& logits, const Tensor& targets, int64_t first_row,
                                               const Tensor& maxima, const Tensor& sums, double loss_weight) {
  OpTimer timer(*this, Kernel::cross_entropy);
  const at::Tensor z = unwrap(logits).to(at::kFloat);
  const at::Tensor m = at::amax(unwrap(maxima), -1, true);
  const at::Tensor& summed = unwrap(sums);
  const at::Tensor sum_exp = summed.narrow(-1, 0, 1), target = summed.narrow(-1, 1, 1);
  const at::Tensor t = unwrap(targets);
  const at::Tensor valid = (t >= 0).unsqueeze(-1).to(at::kFloat);  // padding: no loss, no gradient
  // log Σ exp(z − M) − (z[target] − M) = logsumexp(z) − z[target], the row's loss.
  const at::Tensor loss = ((at::log(sum_exp) - target) * valid).sum().mul(loss_weight).reshape({1});
  const ShardTokens shard = shard_tokens(t, first_row, z.size(-1));
  at::Tensor d = at::exp(z - m).div_(sum_exp);
  d.scatter_add_(-1, shard.rows.unsqueeze(-1), -shard.inside.unsqueeze(-1).to(at::kFloat));
  return loss_output(loss, d * valid, logits.dtype());
}

double TorchBackend::read_scalar(const Tensor& x) {
  OpTimer timer(*this, Kernel::read_scalar);
  return unwrap(x).item<double>();
}

namespace {
std::vector<std::shared_ptr<TorchTensor>> handles(const std::vector<Tensor>& tensors) {
  std::vector<std::shared_ptr<TorchTensor>> out;
  for (const Tensor& t : tensors)
    if (t.defined()) out.push_back(std::static_pointer_cast<TorchTensor>(t.shared_impl()));
  return out;
}
}  // namespace

int64_t TorchBackend::offload_mark() {
  return offload_->mark();
}
int64_t TorchBackend::offload_start(int64_t mark, const std::vector<Tensor>& also,
                                    const std::vector<Tensor>& keep) {
  return offload_->start(mark, handles(also), handles(keep));
}
void TorchBackend::offload_finish(int64_t offloaded) {
  offload_->finish(offloaded);
}
void TorchBackend::reload_start(int64_t offloaded) {
  offload_->reload_start(offloaded);
}
void TorchBackend::reload_finish(int64_t offloaded) {
  offload_->reload_finish(offloaded);
}

void TorchBackend::adam_step(Tensor& weight, const Tensor& grad) {
  OpTimer timer(*this, Kernel::adam_step);
  auto it = adam_.find(weight.shared_impl().get());
  PARADYSE_CHECK(it != adam_.end(), "adam_step on a tensor that is not a parameter");
  AdamState& s = *it->second;
  constexpr double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  at::Tensor g = unwrap(grad).to(at::kFloat).reshape(s.m.sizes());
  at::Tensor w = unwrap(weight);
  at::Tensor& master = s.master.defined() ? s.master : w;
#ifdef PARADYSE_FUSED_ADAM
  if (!s.fused_step.defined()) s.fused_step = at::zeros({}, options(DType::fp32));
  s.fused_step.add_(1);  // the kernel reads the step count; Adam(fused=True) increments it first
  at::_fused_adam_({master}, {g}, {s.m}, {s.v}, {}, {s.fused_step}, options_.learning_rate, beta1, beta2,
                   /*weight_decay=*/0.0, epsilon, /*amsgrad=*/false, /*maximize=*/false);
#else
  ++s.step;
  s.m.mul_(beta1).add_(g, 1 - beta1);
  s.v.mul_(beta2).addcmul_(g, g, 1 - beta2);
  const double step_size = options_.learning_rate / (1 - std::pow(beta1, static_cast<double>(s.step)));
  const at::Tensor denominator =
      (s.v / (1 - std::pow(beta2, static_cast<double>(s.step)))).sqrt_().add_(epsilon);
  master.addcdiv_(s.m, denominator, -step_size);
#endif
  if (s.master.defined()) w.copy_(s.master);
}

Tensor TorchBackend::sum_of_squares(const std::vector<Tensor>& tensors, double weight) {
  OpTimer timer(*this, Kernel::sum_of_squares);
  at::Tensor sum = at::zeros({1}, at::TensorOptions(at::kFloat).device(options_.device));
  for (const Tensor& t : tensors) sum += unwrap(t).to(at::kFloat).square().sum();
  return make(sum * weight, DType::fp32);
}

void TorchBackend::scale_(const std::vector<Tensor>& tensors, double factor) {
  OpTimer timer(*this, Kernel::scale_);
  for (const Tensor& t : tensors) unwrap(t).mul_(factor);
}

// ---- communication ----

Pending TorchBackend::start(OpKind kind, const Tensor& input, InFlight flight, Tensor result, int root,
                            int to, int from, CommGroup group) {
  const RankSet ranks = ranks_of(group);
  const CommunicationBytes bytes = communication_bytes(kind, static_cast<double>(input.bytes()), ranks.size);
  calls_.push_back({kind, group, ranks.first, ranks.size, ranks.stride, bytes.size_bytes, bytes.bus_bytes,
                    root, to, from});
  const int64_t token = next_token_++;
  flight.held = std::make_shared<HeldTensors>(held_, flight.keep_alive);
  in_flight_.emplace(token, std::move(flight));
  return Pending(this, token, std::move(result));
}

void TorchBackend::use_shard_degree(int degree) {
  check_shard_degree(degree, job_.size());
  shard_degree_ = degree;
}

Communicator& TorchBackend::communicator(CommGroup group) {
  return group == CommGroup::parallel ? *group_ : subgroup(ranks_of(group));
}

Communicator& TorchBackend::subgroup(const RankSet& ranks) {
  check_subgroup(ranks, job_.rank(), job_.size());
  if (ranks.size == job_.size()) return job_;
  std::unique_ptr<Communicator>& made = subgroups_[{ranks.first, ranks.size, ranks.stride}];
  if (!made) made = job_.subgroup(ranks);
  return *made;
}

void TorchBackend::set_parallel_ranks(const RankSet& ranks) {
  group_ = &subgroup(ranks);
  group_ranks_ = ranks;
}

void TorchBackend::use_group(int first_rank, int degree) {
  set_parallel_ranks({first_rank, degree, 1});
  // Ranks that hold a tensor whole draw its dropout mask alike; ranks of different groups may have drawn
  // different counts of masks before, so the stream restarts from what the group's ranks share.
  replicated_dropout_generator_.set_current_seed(options_.weight_seed * 7919 - 1 +
                                                 static_cast<uint64_t>(++groups_used_) * 1000003 +
                                                 static_cast<uint64_t>(first_rank));
}

Tensor TorchBackend::wait(int64_t token, Tensor result) {
  if (token < 0) return result;
  OpTimer timer(*this, Kernel::wait);
  auto it = in_flight_.find(token);
  PARADYSE_CHECK(it != in_flight_.end(), "wait on an unknown communication");
  InFlight flight = std::move(it->second);
  in_flight_.erase(it);
  if (flight.work) flight.work->wait();
  if (flight.finish) {
    const at::Tensor done = flight.finish();
    result = make(done, result.dtype());
  }
  return result;
}

namespace {
// x split into p chunks along dim, as one contiguous rank-major buffer [p, chunk...].
at::Tensor rank_major(const at::Tensor& x, int dim, int p) {
  if (dim == 0) return x.contiguous();
  return at::stack(x.chunk(p, dim), 0).contiguous();
}
// The inverse on the receiving side: p chunks [p, chunk...] joined along dim.
at::Tensor joined(const at::Tensor& buffer, const Shape& chunk, int dim, int p) {
  Shape shape{p};
  shape.insert(shape.end(), chunk.begin(), chunk.end());
  at::Tensor parts = buffer.view(sizes(shape));
  if (dim == 0) {
    Shape merged = chunk;
    merged[0] *= p;
    return parts.view(sizes(merged));
  }
  return at::cat(parts.unbind(0), dim);
}
}  // namespace

Pending TorchBackend::all_gather_over(CommGroup group, const Tensor& x, int dim) {
  Communicator& over = communicator(group);
  const int p = over.size();
  if (p == 1) return Pending(this, -1, x);
  OpTimer timer(*this, OpKind::all_gather);
  dim = normalize_dim(x, dim);
  at::Tensor input = unwrap(x).contiguous();
  at::Tensor output = at::empty({p * input.numel()}, input.options());
  InFlight flight{over.all_gather(input.view({-1}), output),
                  {input, output},
                  [output, chunk = x.shape(), dim, p] { return joined(output, chunk, dim, p); },
                  {}};
  return start(OpKind::all_gather, x, std::move(flight), make(output, x.dtype()), -1, -1, -1, group);
}

Pending TorchBackend::reduce_scatter_over(CommGroup group, const Tensor& x, int dim) {
  Communicator& over = communicator(group);
  const int p = over.size();
  if (p == 1) return Pending(this, -1, x);
  OpTimer timer(*this, OpKind::reduce_scatter);
  dim = normalize_dim(x, dim);
  PARADYSE_CHECK(x.size(dim) % p == 0, "reduce_scatter of " + to_string(x.shape()) + " over " +
                                           std::to_string(p) + " ranks along dim " + std::to_string(dim));
  Shape shape = x.shape();
  shape[static_cast<std::size_t>(dim)] /= p;
  const at::Tensor input = rank_major(unwrap(x), dim, p);
  at::Tensor output = at::empty(sizes(shape), input.options());
  at::Tensor flat = output.view({-1});
  InFlight flight{over.reduce_scatter(input.view({-1}), flat), {input, output}, {}, {}};
  return start(OpKind::reduce_scatter, x, std::move(flight), make(output, x.dtype()), -1, -1, -1, group);
}

Pending TorchBackend::all_reduce_over(CommGroup group, const Tensor& x) {
  Communicator& over = communicator(group);
  if (over.size() == 1) return Pending(this, -1, x);
  OpTimer timer(*this, OpKind::all_reduce);
  at::Tensor buffer = unwrap(x).contiguous();  // x itself when it is contiguous: in place
  at::Tensor flat = buffer.view({-1});
  InFlight flight{over.all_reduce(flat), {buffer}, {}, {}};
  return start(OpKind::all_reduce, x, std::move(flight), make(buffer, x.dtype()), -1, -1, -1, group);
}

Pending TorchBackend::all_to_all_async(const Tensor& x, int split_dim, int concat_dim) {
  if (degree() == 1) return Pending(this, -1, x);
  OpTimer timer(*this, OpKind::all_to_all);
  split_dim = normalize_dim(x, split_dim);
  concat_dim = normalize_dim(x, concat_dim);
  const int p = degree();
  PARADYSE_CHECK(x.size(split_dim) % p == 0,
                 "all_to_all of " + to_string(x.shape()) + " over " + std::to_string(p) + " ranks");
  Shape chunk = x.shape();
  chunk[static_cast<std::size_t>(split_dim)] /= p;
  const at::Tensor input = rank_major(unwrap(x), split_dim, p);
  at::Tensor output = at::empty_like(input);
  InFlight flight{group_->all_to_all(input.view({-1}), output),
                  {input, output},
                  [output, chunk, concat_dim, p] { return joined(output, chunk, concat_dim, p); },
                  {}};
  return start(OpKind::all_to_all, x, std::move(flight), make(output, x.dtype()));
}

Pending TorchBackend::broadcast_async(const Tensor& x, int root) {
  if (degree() == 1) return Pending(this, -1, x);
  OpTimer timer(*this, OpKind::broadcast);
  at::Tensor buffer =
      rank() == root ? unwrap(x).contiguous() : at::empty(unwrap(x).sizes(), unwrap(x).options());
  at::Tensor flat = buffer.view({-1});
  InFlight flight{group_->broadcast(flat, root), {buffer}, {}, {}};
  return start(OpKind::broadcast, x, std::move(flight), rank() == root ? x : make(buffer, x.dtype()), root);
}

Pending TorchBackend::reduce_async(const Tensor& x, int root) {
  if (degree() == 1) return Pending(this, -1, x);
  OpTimer timer(*this, OpKind::reduce);
  at::Tensor buffer = unwrap(x).contiguous();
  at::Tensor flat = buffer.view({-1});
  InFlight flight{group_->reduce(flat, root), {buffer}, {}, {}};
  return start(OpKind::reduce, x, std::move(flight), rank() == root ? make(buffer, x.dtype()) : Tensor(),
               root);
}

Pending TorchBackend::send_recv_async(const Tensor& x, int to, int from) {
  PARADYSE_CHECK(to >= 0 && to < degree() && from >= 0 && from < degree(),
                 "send_recv peer outside the group");
  OpTimer timer(*this, OpKind::send_recv);
  const at::Tensor send = unwrap(x).contiguous();
  if (degree() == 1) return start(OpKind::send_recv, x, {}, make(send.clone(), x.dtype()), -1, to, from);
  at::Tensor recv = at::empty_like(send);
  at::Tensor recv_flat = recv.view({-1});
  InFlight flight{group_->send_recv(send.view({-1}), to, recv_flat, from), {send, recv}, {}, {}};
  return start(OpKind::send_recv, x, std::move(flight), make(recv, x.dtype()), -1, to, from);
}

}  // namespace paradyse::real
