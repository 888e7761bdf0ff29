// MegatronCZ: context parallelism with ring attention (Liu et al. 2023; the loop of ring-flash-attention's
// ring_flash_attn.py and zigzag_ring_flash_attn.py) + ZeRO-3 weights. In/out [b, s/p, h] in the unified
// layout: for causal models this rank's tokens are the zig-zag chunks r and 2p−1−r (sequence_layout.hpp), so
// every rank computes the same number of causal pairs; for non-causal models the contiguous chunk r.
//
// Attention: q, k, v of the local tokens through the whole (gathered) W_qkv; then ring attention over
// all heads (ring_attention.hpp: p steps, the K/V block of rank (r−i) mod p at step i, the next exchange
// posted first, a mask by position, blocks merged by log-sum-exp; backward re-circulates K/V and sends
// each block's fp32 dK/dV accumulator p−1 hops to its owner). K and V travel apart, two messages per hop,
// as ring_flash_attn.py sends them. The last ring step posts no exchange, so its block's compute hides the
// W_proj gather instead. The MLP is zero3::mlp_forward / mlp_backward. Constraints: only the unified
// layout's (Strategy::unsupported) — ring attention works for any head count. Saved by the attention: its
// input, q/k/v, out (bf16) and lse (fp32): (2h + 2(h + 2h_kv) + 2h + 4a)·b·s/p bytes; with the zero3 MLP
// ≈ 34·sbh/p (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
// MLSys 2023, Table 2: 34·sbh per layer once the attention keeps no s² scores, here over p ranks).
//
// Volume per layer (ring ≈ 6(c−1)/c·b·s·h_kv + ZeRO-3 3(N−1)/N·Φ_layer), exactly:
//   ring: K and V, (p−1) hops forward and (p−1) again backward, bf16: 8(p−1)/p·b·s·h_kv bytes; the dK, dV
//         accumulators (p−1) hops in fp32: another 8(p−1)/p·b·s·h_kv bytes. In all 16(p−1)/p·b·s·h_kv
//         bytes = 8(p−1)/p·b·s·h_kv bf16 elements: the estimate's 6(p−1)/p (K, V twice and dK, dV
//         once, all in bf16) with dK, dV in fp32;
//         6(p−1) send/recvs, K, V, dK and dV each its own message.
//   ZeRO-3: all-gather of W_qkv, W_proj, W_in, W_out forward and again backward, 2(p−1)/p·Φ_layer, and a
//         reduce-scatter of their gradients, (p−1)/p·Φ_layer, with Φ_layer = (h + 2h_kv)·h + h·h +
//         mlp_in_rows·h + f·h elements (bf16).
#include "strategies/library.hpp"
#include "strategies/ring_attention.hpp"
#include "strategies/zero3.hpp"

namespace paradyse {
namespace {

struct MegatronCzAttentionSaved final : SavedActivations {
  Tensor x;          // [b, s/p, h] normalised input: the W_qkv gradient needs it
  ring::Saved ring;  // q and K, V apart: views of one [b, s/p, h + 2h_kv] projection; out; lse
};

class MegatronCZ final : public zero3::Zero3MlpStrategy {
 public:
  std::string_view name() const override { return "megatron_cz"; }
  std::string_view summary() const override {
    return "context parallel ring attention (zig-zag when causal) + ZeRO-3 weights";
  }

  SublayerOutput attention_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                   const Tensor& x) const override {
    auto saved = std::make_unique<MegatronCzAttentionSaved>();
    saved->x = x;
    zero3::Projected projected = zero3::project_qkv(be, ctx, w, x);  // [b, s/p, h] → q, k, v
    saved->ring.q = std::move(projected.q);                          // [b, s/p, a, d]
    // [b, s/p, a_kv, d] each: two messages per hop, as in ring_flash_attn.py
    saved->ring.kv = ring::KvBlock::apart(std::move(projected.k), std::move(projected.v));

    be.label("attention");
    Pending w_proj;
    AttentionOutput attention = ring::attention_forward(be, ctx, saved->ring.q, saved->ring.kv, [&] {
      be.label("proj");  // the last block's compute hides the W_proj gather, as no exchange is left
      w_proj = zero3::gather_async(be, w, &LayerWeights::proj);
      be.label("attention");
    });
    Tensor y =
        zero3::project_out(be, ctx.model, w_proj.wait(), attention.out);  // [b, s/p, a, d] → [b, s/p, h]
    saved->ring.out = std::move(attention.out);
    saved->ring.lse = std::move(attention.lse);
    return {std::move(y), std::move(saved)};
  }

  Tensor attention_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                            SavedActivations& saved_base, const Tensor& d_y,
                            LayerWeights& grads) const override {
    auto& saved = saved_as<MegatronCzAttentionSaved>(saved_base);
    Tensor d_o = zero3::project_out_backward(be, ctx.model, w, saved.ring.out, d_y, grads);  // [b, s/p, a, d]

    be.label("attention");
    // Moved in: q/k/v, out and lse are freed as soon as the ring is done.
    ring::Grads ring_grads = ring::attention_backward(be, ctx, std::move(d_o), std::move(saved.ring));
    ring::Bf16Grads d = ring::bf16_grads(be, ring_grads);
    Tensor d_x = zero3::project_qkv_backward(be, ctx, w, saved.x, d.d_q, d.d_k, d.d_v, grads);
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
