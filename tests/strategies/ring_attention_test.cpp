#include "strategies/ring_attention.hpp"

#include <catch2/catch.hpp>

#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;
using namespace paradyse::testing;

namespace {

std::vector<const Op*> ops_of_kind(const Program& program, OpKind kind) {
  std::vector<const Op*> ops;
  for (const Op& op : program.ops)
    if (op.kind == kind) ops.push_back(&op);
  return ops;
}

double bus_bytes(const Program& program, OpKind kind) {
  double bytes = 0;
  for (const Op* op : ops_of_kind(program, kind)) bytes += op->bus_bytes;
  return bytes;
}

// Every communication op is waited by exactly one wait op, which comes after it.
void require_each_exchange_waited_once(const Program& program) {
  std::vector<int> waits(program.ops.size(), 0);
  for (OpId id = 0; id < program.ops.size(); ++id) {
    const Op& op = program.ops[id];
    if (op.kind != OpKind::wait) continue;
    REQUIRE(op.deps.size() == 1);
    REQUIRE(op.deps[0] < id);
    ++waits[op.deps[0]];
  }
  for (OpId id = 0; id < program.ops.size(); ++id)
    if (is_communication(program.ops[id].kind)) REQUIRE(waits[id] == 1);
}

// The document of a position, by walking the ends: the first end beyond it.
int64_t document_of(const AttentionMask& mask, int64_t position) {
  if (!mask.document_ends) return 0;
  int64_t document = 0;
  for (const int64_t end : *mask.document_ends) {
    if (position < end) return document;
    ++document;
  }
  return -1;
}

// The (query, key) position pairs a mask computes, with their multiplicity.
void count_pairs(const AttentionMask& mask, std::map<std::pair<int64_t, int64_t>, int>& pairs) {
  for (const TokenRange& queries : mask.queries)
    for (int64_t q = queries.begin; q < queries.begin + queries.length; ++q)
      for (const TokenRange& keys : mask.keys)
        for (int64_t k = keys.begin; k < keys.begin + keys.length; ++k)
          if ((!mask.causal || k <= q) && document_of(mask, q) == document_of(mask, k)) ++pairs[{q, k}];
}

// A block of a_kv' = 2 KV heads of dimension 64 over n local tokens, packed or apart.
ring::KvBlock kv_block(Backend& be, int64_t b, int64_t n, bool packed) {
  if (packed) return ring::KvBlock::packed(be.zeros({b, n, 4, 64}, DType::bf16));
  Tensor k = be.zeros({b, n, 2, 64}, DType::bf16);
  return ring::KvBlock::apart(std::move(k), be.zeros({b, n, 2, 64}, DType::bf16));
}

}  // namespace

TEST_CASE("ring: step j holds rank (r − j) mod p's block, the exchange posted before its compute",
          "[strategies]") {
  for (int p : {1, 2, 4})
    for (int rank = 0; rank < p; ++rank) {
      INFO("p " << p << " rank " << rank);
      TracingBackend be(rank, p);
      const Tensor block = be.zeros({1, 128, 256}, DType::bf16);
      const std::size_t first_ring_op = be.program().ops.size();
      std::vector<int> owners;
      ring::for_each_block(be, block, [&](const ring::Step& step, const Tensor& held) {
        REQUIRE(step.index == static_cast<int>(owners.size()));
        REQUIRE(step.last == (step.index == p - 1));
        REQUIRE(held.shape() == block.shape());
        owners.push_back(step.owner);
        Tensor compute = be.cast(held, DType::fp32);  // stands for the block's compute
      });
      std::vector<int> expected;
      for (int j = 0; j < p; ++j) expected.push_back(((rank - j) % p + p) % p);
      REQUIRE(owners == expected);

      // Issue order: (send_recv, compute, wait) for each of the p−1 steps that pass their block on, then
      // the last step's compute alone.
      std::vector<OpKind> kinds;
      for (std::size_t i = first_ring_op; i < be.program().ops.size(); ++i)
        kinds.push_back(be.program().ops[i].kind);
      std::vector<OpKind> expected_kinds;
      for (int j = 0; j + 1 < p; ++j)
        expected_kinds.insert(expected_kinds.end(), {OpKind::send_recv, OpKind::memory_bound, OpKind::wait});
      expected_kinds.push_back(OpKind::memory_bound);
      REQUIRE(kinds == expected_kinds);

      const Program& program = be.program();
      for (const Op* op : ops_of_kind(program, OpKind::send_recv)) {
        REQUIRE(op->send_to == (rank + 1) % p);
        REQUIRE(op->recv_from == (rank - 1 + p) % p);
        REQUIRE(op->bus_bytes == static_cast<double>(block.bytes()));
      }
      require_each_exchange_waited_once(program);
    }
}

TEST_CASE("ring: a K/V block is one message per hop packed, two apart, with the same bytes", "[strategies]") {
  const int64_t b = 2, n = 96;
  for (int p : {1, 2, 4})
    for (bool packed : {true, false}) {
      INFO("p " << p << " packed " << packed);
      TracingBackend be(p - 1, p);
      const ring::KvBlock block = kv_block(be, b, n, packed);
      int steps = 0;
      ring::for_each_block(be, block, [&](const ring::Step&, const ring::KvBlock& held) {
        REQUIRE(held.is_packed() == packed);
        REQUIRE(ring::keys(be, held).shape() == Shape{b, n, 2, 64});
        REQUIRE(ring::values(be, held).shape() == Shape{b, n, 2, 64});
        ++steps;
      });
      REQUIRE(steps == p);
      const Program& program = be.program();
      REQUIRE(ops_of_kind(program, OpKind::send_recv).size() ==
              static_cast<std::size_t>((packed ? 1 : 2) * (p - 1)));
      // K and V: 2 tensors of b·n·h_kv' bf16 elements (h_kv' = 2·64) per hop.
      REQUIRE(bus_bytes(program, OpKind::send_recv) == Approx(4.0 * (p - 1) * b * n * 128));
      require_each_exchange_waited_once(program);
    }
}

TEST_CASE("ring: each rank's block masks cover its causal pairs exactly once, and all ranks every pair",
          "[strategies]") {
  const ModelSpec model = small_model(true);
  const ModelSpec bidirectional = small_model(false);
  const int64_t s = 48;  // a multiple of 2p for p = 1, 2, 4: small enough to enumerate the pairs
  for (int p : {1, 2, 4})
    for (bool causal : {true, false})
      for (bool zigzag : {true, false}) {
        INFO("p " << p << " causal " << causal << " zigzag " << zigzag);
        const SequenceLayout layout(s, p, zigzag);
        const LayerContext ctx{causal ? model : bidirectional, layout, 1, Recompute::none};
        std::map<std::pair<int64_t, int64_t>, int> all_pairs;
        std::vector<double> pairs_by_rank;
        for (int rank = 0; rank < p; ++rank) {
          TracingBackend be(rank, p);
          std::map<std::pair<int64_t, int64_t>, int> pairs;
          double computed = 0;
          ring::for_each_block(be, be.zeros({1, s / p, 8}, DType::bf16),
                               [&](const ring::Step& step, const Tensor&) {
                                 const AttentionMask mask = ring::block_mask(ctx, rank, step.owner);
                                 count_pairs(mask, pairs);
                                 computed += mask.computed_pairs();
                               });
          // Exactly the pairs of this rank's queries: every key, or every key at or before the query.
          std::map<std::pair<int64_t, int64_t>, int> expected;
          for (const TokenRange& queries : layout.local(rank))
            for (int64_t q = queries.begin; q < queries.begin + queries.length; ++q)
              for (int64_t k = 0; k < (causal ? q + 1 : s); ++k) expected[{q, k}] = 1;
          INFO("rank " << rank);
          REQUIRE(pairs == expected);
          REQUIRE(computed == static_cast<double>(expected.size()));
          pairs_by_rank.push_back(computed);
          for (const auto& [pair, count] : pairs) all_pairs[pair] += count;
        }
        const double total = causal ? s * (s + 1) / 2.0 : static_cast<double>(s * s);
        REQUIRE(all_pairs.size() == static_cast<std::size_t>(total));
        for (const auto& [pair, count] : all_pairs) REQUIRE(count == 1);
        // Zig-zag (or no mask) gives every rank the same share: 1/p of the pairs.
        if (zigzag || !causal)
          for (double share : pairs_by_rank) REQUIRE(share == Approx(total / p));
      }
}

TEST_CASE("ring over packed documents: every pair within a document exactly once, the same share per rank",
          "[strategies]") {
  // Documents of 8, 40, 8 and 24 tokens: each a multiple of 2p for p = 1, 2, 4, so none is padded;
  // the short ones give each rank a single token per zig-zag chunk at p = 4.
  const std::vector<int64_t> documents{8, 40, 8, 24};
  const int64_t s = 80;
  for (int p : {1, 2, 4})
    for (bool causal : {true, false}) {
      INFO("p " << p << " causal " << causal);
      const ModelSpec model = small_model(causal);
      const SequenceLayout layout(documents, p, causal);
      const LayerContext ctx{model, layout, 1, Recompute::none};
      std::map<std::pair<int64_t, int64_t>, int> all_pairs;
      for (int rank = 0; rank < p; ++rank) {
        TracingBackend be(rank, p);
        double computed = 0;
        std::map<std::pair<int64_t, int64_t>, int> pairs;
        ring::for_each_block(be, be.zeros({1, s / p, 8}, DType::bf16),
                             [&](const ring::Step& step, const Tensor&) {
                               const AttentionMask mask = ring::block_mask(ctx, rank, step.owner);
                               count_pairs(mask, pairs);
                               computed += mask.computed_pairs();
                             });
        INFO("rank " << rank);
        REQUIRE(computed == static_cast<double>(pairs.size()));
        // Each document split alike over the ranks: every rank computes 1/p of each document's pairs.
        double share = 0;
        for (const int64_t length : documents)
          share += (causal ? static_cast<double>(length * (length + 1)) / 2
                           : static_cast<double>(length * length)) /
                   p;
        REQUIRE(computed == Approx(share));
        for (const auto& [pair, count] : pairs) all_pairs[pair] += count;
      }
      std::map<std::pair<int64_t, int64_t>, int> expected;
      int64_t begin = 0;
      for (const int64_t length : documents) {
        for (int64_t q = begin; q < begin + length; ++q)
          for (int64_t k = begin; k < (causal ? q + 1 : begin + length); ++k) expected[{q, k}] = 1;
        begin += length;
      }
      REQUIRE(all_pairs == expected);
    }
}

TEST_CASE("ring attention: messages and bytes of forward and backward in closed form, packed or apart",
          "[strategies]") {
  // ring_attention.hpp: with m = 1 packed or 2 apart, forward m(p−1) K/V messages of 4(p−1)·b·n·h_kv'
  // bytes; backward m(p−1) K/V messages again and m(p−1) fp32 dK/dV accumulator messages of
  // 8(p−1)·b·n·h_kv' bytes.
  const ModelSpec model = small_model(true);
  const int64_t b = 2, s = 1024, h_kv = 2 * 64, heads = 4;
  for (int p : {1, 2, 4})
    for (bool packed : {true, false})
      for (int rank : {0, p - 1}) {
        INFO("p " << p << " packed " << packed << " rank " << rank);
        const SequenceLayout layout(s, p, true);
        const LayerContext ctx{model, layout, b, Recompute::none};
        const int64_t n = s / p;
        const int m = packed ? 1 : 2;
        TracingBackend be(rank, p);
        const Tensor q = be.zeros({b, n, heads, 64}, DType::bf16);
        const ring::KvBlock kv = kv_block(be, b, n, packed);

        const std::size_t forward_begin = be.program().ops.size();
        AttentionOutput out = ring::attention_forward(be, ctx, q, kv);
        const std::size_t forward_end = be.program().ops.size();
        REQUIRE(out.out.shape() == q.shape());
        REQUIRE(out.lse.shape() == Shape{b, heads, n});
        REQUIRE(out.lse.dtype() == DType::fp32);

        ring::Grads grads = ring::attention_backward(be, ctx, be.zeros(q.shape(), DType::bf16),
                                                     ring::Saved{q, kv, out.out, out.lse});
        const ring::KvBlock d_kv = grads.take_d_kv(be);
        REQUIRE(grads.d_q.shape() == q.shape());
        REQUIRE(grads.d_q.dtype() == DType::fp32);
        // p > 1: the accumulator back home, fp32 in kv's layout; p = 1: the own block's bf16 share, apart.
        REQUIRE(d_kv.is_packed() == (packed && p > 1));
        REQUIRE(ring::keys(be, d_kv).dtype() == (p > 1 ? DType::fp32 : DType::bf16));
        REQUIRE(ring::keys(be, d_kv).shape() == ring::keys(be, kv).shape());
        REQUIRE(ring::values(be, d_kv).shape() == ring::values(be, kv).shape());

        const Program& program = be.program();
        int forward_messages = 0, backward_bf16 = 0, backward_fp32 = 0;
        double forward_bytes = 0, backward_bf16_bytes = 0, backward_fp32_bytes = 0;
        for (std::size_t i = 0; i < program.ops.size(); ++i) {
          const Op& op = program.ops[i];
          if (op.kind != OpKind::send_recv) continue;
          REQUIRE(op.send_to == (rank + 1) % p);
          REQUIRE(op.recv_from == (rank - 1 + p) % p);
          if (i >= forward_begin && i < forward_end) {
            ++forward_messages;
            forward_bytes += op.bus_bytes;
          } else if (op.size_bytes == static_cast<double>(b * n * h_kv * 2 * 2 / m)) {  // K/V, bf16
            ++backward_bf16;
            backward_bf16_bytes += op.bus_bytes;
          } else {
            REQUIRE(op.size_bytes == static_cast<double>(b * n * h_kv * 4 * 2 / m));  // dK/dV, fp32
            ++backward_fp32;
            backward_fp32_bytes += op.bus_bytes;
          }
        }
        REQUIRE(forward_messages == m * (p - 1));
        REQUIRE(backward_bf16 == m * (p - 1));
        REQUIRE(backward_fp32 == m * (p - 1));
        const double bnh = static_cast<double>(b * n * h_kv);
        REQUIRE(forward_bytes == Approx(4.0 * (p - 1) * bnh));
        REQUIRE(backward_bf16_bytes == Approx(4.0 * (p - 1) * bnh));
        REQUIRE(backward_fp32_bytes == Approx(8.0 * (p - 1) * bnh));
        // Zig-zag chunks meet every block: p block forwards and p block backwards.
        REQUIRE(ops_of_kind(program, OpKind::attention_forward).size() == static_cast<std::size_t>(p));
        REQUIRE(ops_of_kind(program, OpKind::attention_backward).size() == static_cast<std::size_t>(p));
        require_each_exchange_waited_once(program);
      }
}

TEST_CASE("ring attention: a block above the causal diagonal is not computed but still travels",
          "[strategies]") {
  // Contiguous causal chunks: rank r's queries see the blocks of ranks ≤ r only.
  const ModelSpec model = small_model(true);
  const int p = 4;
  const int64_t s = 512, n = s / p;
  const SequenceLayout layout(s, p, false);
  const LayerContext ctx{model, layout, 1, Recompute::none};
  for (int rank = 0; rank < p; ++rank) {
    INFO("rank " << rank);
    TracingBackend be(rank, p);
    const Tensor q = be.zeros({1, n, 4, 64}, DType::bf16);
    const ring::KvBlock kv = kv_block(be, 1, n, true);
    AttentionOutput out = ring::attention_forward(be, ctx, q, kv);
    ring::Grads grads = ring::attention_backward(be, ctx, be.zeros(q.shape(), DType::bf16),
                                                 ring::Saved{q, kv, out.out, out.lse});
    REQUIRE(grads.take_d_kv(be).is_packed());  // the accumulator came back, whatever the blocks skipped
    const Program& program = be.program();
    REQUIRE(ops_of_kind(program, OpKind::attention_forward).size() == static_cast<std::size_t>(rank + 1));
    REQUIRE(ops_of_kind(program, OpKind::attention_backward).size() == static_cast<std::size_t>(rank + 1));
    REQUIRE(ops_of_kind(program, OpKind::send_recv).size() == static_cast<std::size_t>(3 * (p - 1)));
    require_each_exchange_waited_once(program);
  }
}
