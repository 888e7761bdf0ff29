#include "strategies/ring_attention.hpp"

#include "strategies/core_attention.hpp"

namespace paradyse::ring {

Neighbours neighbours(const Groups& be) {
  const int p = be.degree(), r = be.rank();
  return {(r + 1) % p, (r - 1 + p) % p};
}

Tensor keys(Compute& be, const KvBlock& block) {
  return block.is_packed() ? be.slice(block.kv, 2, 0, block.kv.size(2) / 2) : block.k;
}

Tensor values(Compute& be, const KvBlock& block) {
  return block.is_packed() ? be.slice(block.kv, 2, block.kv.size(2) / 2, block.kv.size(2) / 2) : block.v;
}

KvBlock zeros_like(Compute& be, const KvBlock& block, DType dtype) {
  if (block.is_packed()) return KvBlock::packed(be.zeros(block.kv.shape(), dtype));
  Tensor k = be.zeros(block.k.shape(), dtype);
  return KvBlock::apart(std::move(k), be.zeros(block.v.shape(), dtype));
}

void add_into(Compute& be, const KvBlock& target, const KvBlock& x) {
  if (target.is_packed() && x.is_packed()) {
    Tensor sum = target.kv;
    be.add_(sum, x.kv);
    return;
  }
  Tensor k = keys(be, target), v = values(be, target);
  be.add_(k, keys(be, x));
  be.add_(v, values(be, x));
}

PendingBlock::PendingBlock(Backend& be, const Neighbours& ring, const Tensor& block)
    : first_(be.send_recv_async(block, ring.next, ring.previous)) {}

PendingBlock::PendingBlock(Backend& be, const Neighbours& ring, const KvBlock& block) {
  if (block.is_packed()) {
    first_ = be.send_recv_async(block.kv, ring.next, ring.previous);
  } else {
    first_ = be.send_recv_async(block.k, ring.next, ring.previous);
    second_ = be.send_recv_async(block.v, ring.next, ring.previous);
  }
}

void PendingBlock::wait(Tensor& block) {
  PARADYSE_CHECK(!second_.valid(), "a K/V block waited as one tensor");
  block = first_.wait();
}

void PendingBlock::wait(KvBlock& block) {
  if (!second_.valid()) {
    block.kv = first_.wait();
    return;
  }
  block.k = first_.wait();
  block.v = second_.wait();
}

AttentionMask block_mask(const LayerContext& ctx, int rank, int owner) {
  return core_attention::mask(ctx, ctx.layout.local(rank), ctx.layout.local(owner));
}

AttentionOutput attention_forward(Backend& be, const LayerContext& ctx, const Tensor& q, const KvBlock& kv,
                                  const std::function<void()>& before_last_block) {
  PARADYSE_CHECK(ctx.layout.degree() == be.degree(), "the sequence layout's degree is not the group's");
  AttentionOutput merged;
  for_each_block(be, kv, [&](const Step& step, const KvBlock& block) {
    if (step.last && before_last_block) before_last_block();
    const AttentionMask mask = block_mask(ctx, be.rank(), step.owner);
    if (mask.empty()) return;  // no pair to compute (causal diagonal, documents): the block travels on
    AttentionOutput part = be.attention_forward(q, keys(be, block), values(be, block), mask);
    if (!merged.out.defined())
      merged = std::move(part);
    else
      be.merge_attention(merged.out, merged.lse, part);
  });
  PARADYSE_CHECK(merged.out.defined(), "ring attention computed no block");  // the own block has the diagonal
  return merged;
}

Grads attention_backward(Backend& be, const LayerContext& ctx, Tensor d_out, Saved saved) {
  const Neighbours ring = neighbours(be);
  Grads result;
  // ring-flash-attention sums the block gradients in fp32; so do we, dq here, dK/dV while travelling.
  result.d_q = be.zeros(saved.q.shape(), DType::fp32);
  for_each_block(be, saved.kv, [&](const Step& step, const KvBlock& block) {
    const AttentionMask mask = block_mask(ctx, be.rank(), step.owner);
    AttentionGrads grads;
    if (!mask.empty()) {
      grads = be.attention_backward(d_out, saved.q, keys(be, block), values(be, block), saved.out, saved.lse,
                                    mask);
      be.add_(result.d_q, grads.d_q);
      grads.d_q = Tensor();
    }
    if (step.index == 0) {
      result.own_ = KvBlock::apart(std::move(grads.d_k), std::move(grads.d_v));
      return;
    }
    // The accumulator of this step's block starts here at step 1 and makes p−1 hops, one per step, so
    // that after the last step it lands on the block's owner. Waited only now: this block's compute hid
    // its arrival.
    KvBlock d_kv;
    if (step.index == 1) {
      d_kv = zeros_like(be, block, DType::fp32);
    } else {
      result.arriving_.wait(d_kv);
      result.sent_ = KvBlock();  // that exchange has completed: its send buffers are free
    }
    if (grads.d_k.defined()) add_into(be, d_kv, KvBlock::apart(grads.d_k, grads.d_v));
    grads = {};
    result.arriving_ = PendingBlock(be, ring, d_kv);
    result.sent_ = std::move(d_kv);
  });
  d_out = Tensor();
  saved = {};  // q (with k, v when they are views of one projection), out and lse: dead once the ring is done
  PARADYSE_CHECK(result.own_.k.defined(), "ring attention skipped this rank's own block");
  return result;
}

KvBlock Grads::take_d_kv(Backend& be) {
  PARADYSE_CHECK(own_.k.defined(), "the own block's dK/dV taken twice");
  KvBlock own = std::move(own_);
  own_ = KvBlock();
  if (!arriving_.valid()) return own;  // p = 1: nothing travelled
  KvBlock d_kv;
  arriving_.wait(d_kv);
  sent_ = KvBlock();
  add_into(be, d_kv, own);
  own = KvBlock();
  return d_kv;
}

namespace {

Tensor to_bf16(Backend& be, Tensor&& x) {
  if (x.dtype() == DType::bf16) return std::move(x);
  Tensor y = be.cast(x, DType::bf16);
  x = Tensor();
  return y;
}

}  // namespace

Bf16Grads bf16_grads(Backend& be, Grads& grads) {
  KvBlock d_kv = grads.take_d_kv(be);
  PARADYSE_CHECK(!d_kv.is_packed(), "bf16_grads of a ring whose K and V travelled packed");
  Bf16Grads result;
  result.d_k = to_bf16(be, std::move(d_kv.k));
  result.d_v = to_bf16(be, std::move(d_kv.v));
  result.d_q = to_bf16(be, std::move(grads.d_q));
  return result;
}

}  // namespace paradyse::ring
