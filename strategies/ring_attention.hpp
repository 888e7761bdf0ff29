// Ring attention, written once: the ring of K/V blocks that MegatronCZ (all heads), METP (one head group
// at a time) and ColossalZ (unfused scores, through the generic ring alone) run over the sequence shards.
// The loop of ring-flash-attention's ring_flash_attn.py and zigzag_ring_flash_attn.py (Liu et al. 2023).
// METP's MLP passes its weight shards around the same generic ring.
//
// The ring: p steps; at step j rank r holds the block that originated on rank (r − j) mod p. Each step
// posts the exchange of the block it holds (send to r+1, receive from r−1) before computing on it and
// waits after: the transfer hides behind the compute and the block received replaces the one used
// (double buffering). Every rank issues the same p−1 exchanges per pass whatever its masks skip, so that
// each send meets a receive of its size.
//
// Flash ring attention: this rank's queries q [b, n, a', d] (n = s/p tokens, a' query heads) attend to
// each block with a mask by position (block_mask), so that the zig-zag chunks of a causal layout stay
// where they are; a block with no pair to compute costs no compute but still travels. A packed sequence's
// blocks mask by document too; as the layout splits every document over every rank
// (sequence_layout.hpp), no block pair is empty for lack of a shared document. Blocks
// merge into (out, lse) by log-sum-exp. Backward (ring_flash_attn_backward): K/V circulate again; dq
// sums locally in fp32; the fp32 dK/dV accumulator of the block held at step j ≥ 1 starts on the rank
// that holds it at step 1 and follows it around the ring, so that after p−1 hops it lands on the
// block's owner, which adds its own share (step 0) last. ring_flash_attn.py starts each accumulator on
// its owner: p hops.
//
// K and V travel packed, one [b, n, 2a_kv', d] buffer and one message per hop (METP), or apart, two
// messages (MegatronCZ, as ring_flash_attn.py sends them). Per rank, with a_kv' KV heads of dimension d
// per block, h_kv' = a_kv'·d, and m = 1 packed or 2 apart:
//   forward:  m(p−1) send/recvs of K and V, 4(p−1)·b·n·h_kv' bytes (bf16);
//   backward: m(p−1) send/recvs of K and V again, 4(p−1)·b·n·h_kv' bytes, and m(p−1) of the dK/dV
//             accumulators, 8(p−1)·b·n·h_kv' bytes (fp32).
// With n = s/p, 4(p−1)/p·b·s·h_kv' bytes per K/V pass and 8(p−1)/p·b·s·h_kv' for the accumulators:
// packing changes the number of messages, never the bytes.
#pragma once

#include <functional>
#include <string_view>
#include <utility>

#include "strategies/strategy.hpp"

namespace paradyse::ring {

// This rank's neighbours: blocks go to `next` = r+1 and come from `previous` = r−1 (mod p).
struct Neighbours {
  int next, previous;
};
Neighbours neighbours(const Groups& be);

// One step of the ring as the rank holding the block sees it.
struct Step {
  int index;  // 0, 1, …, p−1
  int owner;  // the rank the block originated on: (r − index) mod p
  bool last;  // no exchange was posted: nothing travels behind this block's compute
};

// The keys and values of one ring block, [b, n, a_kv', d] each: packed in one tensor [b, n, 2a_kv', d],
// keys then values along the heads, which travels as one message; or apart, as two.
struct KvBlock {
  Tensor kv;    // packed (k and v undefined)
  Tensor k, v;  // apart (kv undefined)

  static KvBlock packed(Tensor kv) { return {std::move(kv), Tensor(), Tensor()}; }
  static KvBlock apart(Tensor k, Tensor v) { return {Tensor(), std::move(k), std::move(v)}; }
  bool is_packed() const { return kv.defined(); }
};
Tensor keys(Compute& be, const KvBlock& block);  // a view when packed
Tensor values(Compute& be, const KvBlock& block);
// A zero block of `block`'s shapes and layout in `dtype`.
KvBlock zeros_like(Compute& be, const KvBlock& block, DType dtype);
// target += x, in place: one add when both are packed, else keys and values apart (as views of a packed one).
void add_into(Compute& be, const KvBlock& target, const KvBlock& x);

// The exchange of one block in flight: each of its tensors sent to the next rank, the previous rank's
// received in its place.
class PendingBlock {
 public:
  PendingBlock() = default;
  PendingBlock(Backend& be, const Neighbours& ring, const Tensor& block);
  PendingBlock(Backend& be, const Neighbours& ring, const KvBlock& block);

  bool valid() const { return first_.valid(); }
  // Replaces `block` by what arrived, tensor by tensor, so that each old tensor is freed as soon as its
  // replacement has arrived. A KvBlock takes the layout that was sent.
  void wait(Tensor& block);
  void wait(KvBlock& block);

 private:
  Pending first_;   // the tensor, the packed K|V, or K
  Pending second_;  // V when apart
};

// The generic ring over `block` (a Tensor or a KvBlock): on_block(Step, block) once per step, the next
// exchange posted before it. `exchange_label`, when given, labels the exchanges and their waits apart
// from the compute. The last block received is freed before returning.
template <class Block, class OnBlock>
void for_each_block(Backend& be, Block block, OnBlock&& on_block, std::string_view exchange_label = {}) {
  const int p = be.degree(), r = be.rank();
  const Neighbours ring = neighbours(be);
  for (int index = 0; index < p; ++index) {
    const Step step{index, (r - index + p) % p, index + 1 == p};
    if (!exchange_label.empty()) be.label(exchange_label);
    PendingBlock next = step.last ? PendingBlock() : PendingBlock(be, ring, block);
    on_block(step, std::as_const(block));
    if (next.valid()) {
      if (!exchange_label.empty()) be.label(exchange_label);
      next.wait(block);
    }
  }
  block = Block();
}

// The (query, key) pairs of this rank's queries and the block that originated on `owner` that attention
// computes. Masking by position lets the zig-zag chunks (or any order) stay where they are.
AttentionMask block_mask(const LayerContext& ctx, int rank, int owner);

// What ring attention's backward needs from its forward.
struct Saved {
  Tensor q;    // [b, n, a', d]: this rank's queries
  KvBlock kv;  // this rank's keys and values: the backward ring starts from them again
  Tensor out;  // [b, n, a', d], merged over all blocks
  Tensor lse;  // [b, a', n] fp32, of the merged rows: every block's backward needs the whole row's
};

// This rank's queries q attended to the whole sequence, block by block, merged by log-sum-exp.
// `before_last_block` runs at the last step, which posts no exchange, before that block's compute, so
// that the compute hides what it starts instead (MegatronCZ's W_proj gather).
AttentionOutput attention_forward(Backend& be, const LayerContext& ctx, const Tensor& q, const KvBlock& kv,
                                  const std::function<void()>& before_last_block = {});

// The gradients of ring attention's inputs. dq is complete when the ring is; dK/dV of this rank's own
// block only once its accumulator has made its last hop.
class Grads {
 public:
  Tensor d_q;  // [b, n, a', d] fp32, summed over all blocks

  // dK, dV of this rank's own block summed over every rank's queries: for p > 1 the accumulator back from
  // its p−1 hops plus the own share, fp32 in kv's layout; for p = 1 the own share alone, bf16 and apart.
  // Waits for the last hop, which the compute issued before this call hides. Call it exactly once.
  KvBlock take_d_kv(Backend& be);

 private:
  friend Grads attention_backward(Backend& be, const LayerContext& ctx, Tensor d_out, Saved saved);
  KvBlock own_;            // bf16, apart: step 0's gradients of this rank's own block, added last
  PendingBlock arriving_;  // the fp32 accumulator on its way here; after the ring, the own block's
  KvBlock sent_;           // the accumulator passed on, kept alive until its exchange completes
};

// The ring's gradients in bf16 with K and V apart, for a projection that takes them so: dK and dV once
// their accumulator has made its last hop (Grads::take_d_kv), then dq, each fp32 sum freed before the
// next is cast (p = 1: the own block's dK, dV are bf16 already).
struct Bf16Grads {
  Tensor d_q, d_k, d_v;
};
Bf16Grads bf16_grads(Backend& be, Grads& grads);

// Backward of attention_forward given the gradient of the merged output. `d_out` and `saved` are
// released once the ring is done: a caller that moves them in frees them there.
Grads attention_backward(Backend& be, const LayerContext& ctx, Tensor d_out, Saved saved);

}  // namespace paradyse::ring
