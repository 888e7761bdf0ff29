// MegatronCZ: context parallelism with ring attention (Liu et al. 2023; the loop of ring-flash-attention's
// ring_flash_attn.py and zigzag_ring_flash_attn.py) + ZeRO-3 weights. In/out [b, s/p, h] in the unified
// layout: for causal models this rank's tokens are the zig-zag chunks r and 2p−1−r (sequence_layout.hpp), so
// every rank computes the same number of causal pairs; for non-causal models the contiguous chunk r.
//
// Attention: q, k, v of the local tokens through the whole (gathered) W_qkv; then p ring steps. At step i
// this rank holds the K/V block that originated on rank (r−i) mod p: it posts the next exchange (send to
// r+1, receive from r−1; double buffered), attends its queries to the block with a mask by position, and
// merges the block into (out, lse). Backward re-circulates K/V the same way; each block's dK/dV is added
// into an fp32 accumulator that travels with the ring and arrives on the block's owner. ring_flash_attn.py
// starts each accumulator on its owner, so it makes p hops; here the owner keeps its own block's share
// (step 0) and the accumulator starts on the next rank, so it makes p−1. The MLP is zero3::mlp_forward /
// mlp_backward. Constraints: only the unified layout's (Strategy::unsupported) — ring attention works for
// any head count. Saved by the attention: its input, q/k/v, out (bf16) and lse (fp32):
// (2h + 2(h + 2h_kv) + 2h + 4a)·b·s/p bytes; with the zero3 MLP ≈ 34·sbh/p (REFERENCE.md §2).
//
// Volume per layer (REFERENCE.md §2: ring ≈ 6(c−1)/c·b·s·h_kv + ZeRO-3 3(N−1)/N·Φ_layer), exactly:
//   ring: K and V, (p−1) hops forward and (p−1) again backward, bf16: 8(p−1)/p·b·s·h_kv bytes; the dK, dV
//         accumulators (p−1) hops in fp32: another 8(p−1)/p·b·s·h_kv bytes. In all 16(p−1)/p·b·s·h_kv
//         bytes = 8(p−1)/p·b·s·h_kv bf16 elements: REFERENCE's 6(p−1)/p with its dK, dV counted in fp32.
//   ZeRO-3: all-gather of W_qkv, W_proj, W_in, W_out forward and again backward, 2(p−1)/p·Φ_layer, and a
//         reduce-scatter of their gradients, (p−1)/p·Φ_layer, with Φ_layer = (h + 2h_kv)·h + h·h +
//         mlp_in_rows·h + f·h elements (bf16).
#include "strategies/library.hpp"
#include "strategies/zero3.hpp"

namespace paradyse {
namespace {

struct AttentionSaved final : SavedActivations {
  Tensor x;        // [b, s/p, h] normalised input: the W_qkv gradient needs it
  Tensor q, k, v;  // views of one [b, s/p, h + 2h_kv] projection; k, v start the backward ring again
  Tensor out;      // [b, s/p, a, d], merged over all blocks
  Tensor lse;      // [b, a, s/p] fp32, of the merged rows: every block's backward needs the whole row's
};

// Which (query, key) pairs of this rank's queries and the block that originated on `owner` attention
// computes. Masking by position lets the zig-zag chunks (or any order) stay where they are.
AttentionMask block_mask(const LayerContext& ctx, int rank, int owner) {
  return {ctx.model.causal, ctx.layout.local(rank), ctx.layout.local(owner)};
}

struct Ring {
  int next, previous;  // send to next, receive from previous
};

Ring ring_of(const Backend& be) {
  const int p = be.degree(), r = be.rank();
  return {(r + 1) % p, (r - 1 + p) % p};
}

class MegatronCZ final : public zero3::Zero3MlpStrategy {
 public:
  std::string_view name() const override { return "megatron_cz"; }
  std::string_view summary() const override {
    return "context parallel ring attention (zig-zag when causal) + ZeRO-3 weights";
  }

  SublayerOutput attention_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                   const Tensor& x) const override {
    const int p = be.degree(), r = be.rank();
    PARADYSE_CHECK(ctx.layout.degree() == p, "the sequence layout's degree is not the group's");
    const Ring ring = ring_of(be);
    auto saved = std::make_unique<AttentionSaved>();
    saved->x = x;
    zero3::Projected projected = zero3::project_qkv(be, ctx.model, w, x);  // [b, s/p, h] → q, k, v
    saved->q = std::move(projected.q);                                     // [b, s/p, a, d]
    saved->k = std::move(projected.k);                                     // [b, s/p, a_kv, d]
    saved->v = std::move(projected.v);

    be.label("attention");
    Tensor k = saved->k, v = saved->v;  // the block held at this step; step 0: this rank's own
    Tensor out, lse;
    Pending w_proj;
    for (int step = 0; step < p; ++step) {
      const int owner = (r - step + p) % p;
      Pending next_k, next_v;
      if (step + 1 < p) {  // post the next exchange first: this step's compute hides it
        next_k = be.send_recv_async(k, ring.next, ring.previous);
        next_v = be.send_recv_async(v, ring.next, ring.previous);
      } else {  // the last block's compute hides the W_proj gather instead
        be.label("proj");
        w_proj = zero3::gather_async(be, w.proj);
        be.label("attention");
      }
      const AttentionMask mask = block_mask(ctx, r, owner);
      if (!mask.empty()) {  // a block entirely above the causal diagonal costs nothing; K/V still travel
        AttentionOutput block = be.attention_forward(saved->q, k, v, mask);
        if (!out.defined()) {
          out = std::move(block.out);
          lse = std::move(block.lse);
        } else {
          be.merge_attention(out, lse, block);
        }
      }
      if (step + 1 < p) {
        k = next_k.wait();
        v = next_v.wait();
      }
    }
    k = Tensor();
    v = Tensor();
    PARADYSE_CHECK(out.defined(), "ring attention computed no block");  // the own block has the diagonal

    Tensor y = zero3::project_out(be, ctx.model, w_proj.wait(), out);  // [b, s/p, a, d] → [b, s/p, h]
    saved->out = std::move(out);
    saved->lse = std::move(lse);
    return {std::move(y), std::move(saved)};
  }

  Tensor attention_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                            SavedActivations& saved_base, const Tensor& d_y,
                            LayerWeights& grads) const override {
    auto& saved = saved_as<AttentionSaved>(saved_base);
    const int p = be.degree(), r = be.rank();
    const Ring ring = ring_of(be);
    Tensor d_o = zero3::project_out_backward(be, ctx.model, w, saved.out, d_y, grads);  // [b, s/p, a, d]

    be.label("attention");
    // ring-flash-attention sums the block gradients in fp32; so do we, dq locally, dK/dV while travelling.
    Tensor d_q = be.zeros(saved.q.shape(), DType::fp32);
    Tensor d_k_own, d_v_own;             // bf16: step 0's gradients of this rank's own K/V, added last
    Pending d_k_arriving, d_v_arriving;  // fp32 accumulators of the block this rank holds next step
    Tensor d_k_sent, d_v_sent;           // kept alive until their exchange completes
    Tensor k = saved.k, v = saved.v;
    for (int step = 0; step < p; ++step) {
      const int owner = (r - step + p) % p;
      Pending next_k, next_v;
      if (step + 1 < p) {
        next_k = be.send_recv_async(k, ring.next, ring.previous);
        next_v = be.send_recv_async(v, ring.next, ring.previous);
      }
      const AttentionMask mask = block_mask(ctx, r, owner);
      AttentionGrads block;
      if (!mask.empty()) {
        block = be.attention_backward(d_o, saved.q, k, v, saved.out, saved.lse, mask);
        be.add_(d_q, block.d_q);
        block.d_q = Tensor();
      }
      if (step == 0) {
        d_k_own = std::move(block.d_k);
        d_v_own = std::move(block.d_v);
      } else {
        // The accumulator of `owner`'s block starts on the rank that holds it at step 1 and makes p−1
        // hops, one per step, so that after the last step it lands on its owner; the owner's own
        // contribution (step 0) waits there. Its wait comes after this block's compute, which hid it.
        Tensor d_k_block, d_v_block;
        if (step == 1) {
          d_k_block = be.zeros(k.shape(), DType::fp32);
          d_v_block = be.zeros(v.shape(), DType::fp32);
        } else {
          d_k_block = d_k_arriving.wait();
          d_v_block = d_v_arriving.wait();
          d_k_sent = Tensor();  // that exchange has completed: its send buffer is free
          d_v_sent = Tensor();
        }
        if (block.d_k.defined()) {
          be.add_(d_k_block, block.d_k);
          be.add_(d_v_block, block.d_v);
        }
        block = {};
        d_k_arriving = be.send_recv_async(d_k_block, ring.next, ring.previous);
        d_v_arriving = be.send_recv_async(d_v_block, ring.next, ring.previous);
        d_k_sent = std::move(d_k_block);
        d_v_sent = std::move(d_v_block);
      }
      if (step + 1 < p) {
        k = next_k.wait();
        v = next_v.wait();
      }
    }
    k = Tensor();
    v = Tensor();
    d_o = Tensor();
    saved.q = Tensor();  // [b, s/p, h + 2h_kv]: dead once the ring is done, as are out and lse
    saved.k = Tensor();
    saved.v = Tensor();
    saved.out = Tensor();
    saved.lse = Tensor();
    PARADYSE_CHECK(d_k_own.defined(), "ring attention skipped this rank's own block");
    Tensor d_k, d_v;
    if (p == 1) {
      d_k = std::move(d_k_own);
      d_v = std::move(d_v_own);
    } else {  // this rank's accumulator, back from its p−1 hops, plus the own block's share
      Tensor d_k_sum = d_k_arriving.wait(), d_v_sum = d_v_arriving.wait();
      d_k_sent = Tensor();
      d_v_sent = Tensor();
      be.add_(d_k_sum, d_k_own);
      be.add_(d_v_sum, d_v_own);
      d_k_own = Tensor();
      d_v_own = Tensor();
      d_k = be.cast(d_k_sum, DType::bf16);
      d_k_sum = Tensor();
      d_v = be.cast(d_v_sum, DType::bf16);
    }
    Tensor d_q_bf16 = be.cast(d_q, DType::bf16);
    d_q = Tensor();

    Tensor d_x = zero3::project_qkv_backward(be, ctx.model, w, saved.x, d_q_bf16, d_k, d_v, grads);
    saved.x = Tensor();
    return d_x;
  }
};

}  // namespace

const Strategy& megatron_cz() {
  static const MegatronCZ strategy;
  return strategy;
}

}  // namespace paradyse
