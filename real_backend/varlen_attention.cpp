#include "real_backend/varlen_attention.hpp"

#include <torch/version.h>

#include <algorithm>
#include <limits>
#include <map>

#include "real_backend/device.hpp"

namespace paradyse::real {
namespace {

// A contiguous run of positions [begin, end) within one document, and the rows that hold it.
struct Run {
  int64_t begin = 0, end = 0;
  std::size_t document = 0;
  Positions rows;
};

// The runs of a tensor's sequence dim: its pieces in the order of their positions, cut at document
// ends, then joined where one ends at the next one's first position in the same document.
std::vector<Run> runs_of(const Positions& positions, const DocumentEnds* ends) {
  struct Piece {
    int64_t begin, length, row;
  };
  std::vector<Piece> pieces;
  int64_t row = 0;
  for (const TokenRange& r : positions) {
    if (r.length > 0) pieces.push_back({r.begin, r.length, row});
    row += r.length;
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  const auto document_of = [&](int64_t position) -> std::size_t {
    if (ends == nullptr) return 0;
    return static_cast<std::size_t>(std::upper_bound(ends->begin(), ends->end(), position) - ends->begin());
  };
  std::vector<Run> runs;
  for (const Piece& piece : pieces)
    for (int64_t begin = piece.begin; begin < piece.begin + piece.length;) {
      const std::size_t document = document_of(begin);
      const int64_t document_end = ends != nullptr && document < ends->size()
                                       ? (*ends)[document]
                                       : std::numeric_limits<int64_t>::max();
      const int64_t end = std::min(piece.begin + piece.length, document_end);
      const TokenRange rows{piece.row + (begin - piece.begin), end - begin};
      if (!runs.empty() && runs.back().end == begin && runs.back().document == document) {
        Run& last = runs.back();
        last.end = end;
        if (last.rows.back().begin + last.rows.back().length == rows.begin)
          last.rows.back().length += rows.length;
        else
          last.rows.push_back(rows);
      } else {
        runs.push_back({begin, end, document, {rows}});
      }
      begin = end;
    }
  return runs;
}

int64_t count(const Positions& rows) {
  int64_t n = 0;
  for (const TokenRange& r : rows) n += r.length;
  return n;
}

// Rows of `rows` in each of `batch` sequences of `length` rows, as indices into [batch · length].
std::vector<int64_t> batch_rows(const std::vector<const Positions*>& tiles_rows, int64_t batch,
                                int64_t length) {
  std::vector<int64_t> indices;
  for (int64_t b = 0; b < batch; ++b)
    for (const Positions* rows : tiles_rows)
      for (const TokenRange& r : *rows)
        for (int64_t i = 0; i < r.length; ++i) indices.push_back(b * length + r.begin + i);
  return indices;
}

// One round's tiles of one kind, packed: the rows of q and k they read and the call's lengths.
struct Packed {
  at::Tensor q_index, k_index;  // into [b · s_q] and [b · s_k]
  std::vector<int64_t> q_lengths, k_lengths;
  bool causal = false;
};

std::vector<Packed> packed_calls(const std::vector<VarlenTile>& tiles, int64_t batch, int64_t s_q,
                                 int64_t s_k, const at::Device& device) {
  // Round r holds the r-th tile of each run of queries (tiles come ordered by run of queries).
  std::map<std::pair<int, bool>, std::vector<const VarlenTile*>> calls;  // (round, causal) → tiles
  int round = 0;
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    round = i > 0 && tiles[i].q_rows.front().begin == tiles[i - 1].q_rows.front().begin ? round + 1 : 0;
    calls[{round, tiles[i].causal}].push_back(&tiles[i]);
  }
  std::vector<Packed> packed;
  for (const auto& [key, of_call] : calls) {
    Packed p;
    p.causal = key.second;
    std::vector<const Positions*> q_rows, k_rows;
    for (int64_t b = 0; b < batch; ++b)
      for (const VarlenTile* tile : of_call) {
        p.q_lengths.push_back(count(tile->q_rows));
        p.k_lengths.push_back(count(tile->k_rows));
      }
    for (const VarlenTile* tile : of_call) {
      q_rows.push_back(&tile->q_rows);
      k_rows.push_back(&tile->k_rows);
    }
    p.q_index = on_device(batch_rows(q_rows, batch, s_q), device);
    p.k_index = on_device(batch_rows(k_rows, batch, s_k), device);
    packed.push_back(std::move(p));
  }
  return packed;
}

// [b, s, heads, d] → [b · s, heads, d]
at::Tensor rows_of(const at::Tensor& t) {
  return t.reshape({t.size(0) * t.size(1), t.size(2), t.size(3)});
}

}  // namespace

LseMerge merge_lse(const at::Tensor& lse_a, const at::Tensor& lse_b) {
  const at::Tensor merged = at::logaddexp(lse_a, lse_b);
  const at::Tensor safe = at::where(at::isinf(merged), at::zeros_like(merged), merged);
  return {merged, at::exp(lse_a - safe), at::exp(lse_b - safe)};
}

std::optional<std::vector<VarlenTile>> varlen_tiles(const AttentionMask& mask) {
  const DocumentEnds* ends = mask.document_ends.get();
  const std::vector<Run> queries = runs_of(mask.queries, ends), keys = runs_of(mask.keys, ends);
  std::vector<VarlenTile> tiles;
  for (const Run& q : queries)
    for (const Run& k : keys) {
      if (k.document != q.document) continue;
      if (!mask.causal || k.end <= q.begin) {
        tiles.push_back({q.rows, k.rows, false});
      } else if (k.begin == q.begin && k.end == q.end) {
        tiles.push_back({q.rows, k.rows, true});
      } else if (k.begin < q.end) {  // some keys before a query, some after it
        return std::nullopt;
      }
    }
  return tiles;
}

VarlenForward tiled_attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const std::vector<VarlenTile>& tiles, double scale,
                                      const VarlenKernels& kernels) {
  const int64_t b = q.size(0), s_q = q.size(1), heads = q.size(2), d = q.size(3);
  const at::Tensor q_rows = rows_of(q), k_rows = rows_of(k), v_rows = rows_of(v);
  const at::TensorOptions fp32 = q.options().dtype(at::kFloat);
  at::Tensor out, lse;  // [b · s_q, heads, d] and [heads, b · s_q], merged over rounds
  for (const Packed& call : packed_calls(tiles, b, s_q, k.size(1), q.device())) {
    const VarlenForward part = kernels.forward(
        {q_rows.index_select(0, call.q_index), k_rows.index_select(0, call.k_index),
         v_rows.index_select(0, call.k_index), call.q_lengths, call.k_lengths, call.causal, scale});
    at::Tensor part_out =
        at::zeros({b * s_q, heads, d}, fp32).index_copy_(0, call.q_index, part.out.to(at::kFloat));
    at::Tensor part_lse = at::full({heads, b * s_q}, -std::numeric_limits<float>::infinity(), fp32)
                              .index_copy_(1, call.q_index, part.lse);
    if (!out.defined()) {
      out = std::move(part_out);
      lse = std::move(part_lse);
      continue;
    }
    const LseMerge merged = merge_lse(lse, part_lse);  // [heads, rows] → [rows, heads, 1] below
    out = out * merged.weight_a.t().unsqueeze(-1) + part_out * merged.weight_b.t().unsqueeze(-1);
    lse = merged.lse;
  }
  if (!out.defined()) {  // no pair at all
    out = at::zeros({b * s_q, heads, d}, fp32);
    lse = at::full({heads, b * s_q}, -std::numeric_limits<float>::infinity(), fp32);
  }
  return {out.view({b, s_q, heads, d}).to(q.scalar_type()),
          lse.view({heads, b, s_q}).permute({1, 0, 2}).contiguous()};
}

VarlenGrads tiled_attention_backward(const at::Tensor& d_out, const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                     const std::vector<VarlenTile>& tiles, double scale,
                                     const VarlenKernels& kernels) {
  const int64_t b = q.size(0), s_q = q.size(1), s_k = k.size(1);
  const at::Tensor q_rows = rows_of(q), k_rows = rows_of(k), v_rows = rows_of(v);
  const at::Tensor d_out_rows = rows_of(d_out.to(q.scalar_type())),
                   out_rows = rows_of(out.to(q.scalar_type()));
  const at::Tensor lse_rows = lse.permute({1, 0, 2}).reshape({q.size(2), b * s_q});  // [heads, b · s_q]
  const at::TensorOptions fp32 = q.options().dtype(at::kFloat);
  at::Tensor d_q = at::zeros(q_rows.sizes(), fp32), d_k = at::zeros(k_rows.sizes(), fp32),
             d_v = at::zeros(v_rows.sizes(), fp32);
  for (const Packed& call : packed_calls(tiles, b, s_q, s_k, q.device())) {
    const VarlenCall packed{q_rows.index_select(0, call.q_index),
                            k_rows.index_select(0, call.k_index),
                            v_rows.index_select(0, call.k_index),
                            call.q_lengths,
                            call.k_lengths,
                            call.causal,
                            scale};
    const VarlenGrads part = kernels.backward(
        packed, d_out_rows.index_select(0, call.q_index),
        {out_rows.index_select(0, call.q_index), lse_rows.index_select(1, call.q_index).contiguous()});
    d_q.index_add_(0, call.q_index, part.d_q.to(at::kFloat));
    d_k.index_add_(0, call.k_index, part.d_k.to(at::kFloat));
    d_v.index_add_(0, call.k_index, part.d_v.to(at::kFloat));
  }
  const at::ScalarType type = q.scalar_type();
  return {d_q.view(q.sizes()).to(type), d_k.view(k.sizes()).to(type), d_v.view(v.sizes()).to(type)};
}

// ATen's FlashAttention-2 entry points in their LibTorch 2.x form: variable-length rows with int32
// cumulative lengths, the log-sum-exp as [heads, total_q].
#if TORCH_VERSION_MAJOR >= 2 && defined(PARADYSE_TORCH_CUDA)
namespace {
at::Tensor cumulative(const std::vector<int64_t>& lengths, const at::Device& device) {
  std::vector<int64_t> sums{0};
  for (int64_t n : lengths) sums.push_back(sums.back() + n);
  return on_device(sums, device).to(at::kInt);
}
int64_t longest(const std::vector<int64_t>& lengths) {
  return lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
}
}  // namespace

std::optional<VarlenKernels> flash_kernels() {
  VarlenKernels kernels;
  kernels.forward = [](const VarlenCall& c) {
    const at::Tensor cu_q = cumulative(c.q_lengths, c.q.device()),
                     cu_k = cumulative(c.k_lengths, c.q.device());
    auto [out, lse, rng_state, unused, debug] = at::_flash_attention_forward(
        c.q.contiguous(), c.k.contiguous(), c.v.contiguous(), cu_q, cu_k, longest(c.q_lengths),
        longest(c.k_lengths), /*dropout_p=*/0.0, c.causal, /*return_debug_mask=*/false, c.scale);
    return VarlenForward{out, lse};
  };
  kernels.backward = [](const VarlenCall& c, const at::Tensor& d_out, const VarlenForward& merged) {
    const at::Tensor cu_q = cumulative(c.q_lengths, c.q.device()),
                     cu_k = cumulative(c.k_lengths, c.q.device());
    // Without dropout the kernel reads no random state.
    const at::Tensor rng_state = at::empty({2}, c.q.options().dtype(at::kUInt64));
    const at::Tensor unused = at::empty(at::IntArrayRef{}, c.q.options().dtype(at::kUInt64));
    auto [d_q, d_k, d_v] = at::_flash_attention_backward(
        d_out.contiguous(), c.q.contiguous(), c.k.contiguous(), c.v.contiguous(), merged.out.contiguous(),
        merged.lse, cu_q, cu_k, longest(c.q_lengths), longest(c.k_lengths), 0.0, c.causal, rng_state, unused,
        c.scale);
    return VarlenGrads{d_q, d_k, d_v};
  };
  return kernels;
}
#else
std::optional<VarlenKernels> flash_kernels() {
  return std::nullopt;
}
#endif

}  // namespace paradyse::real
