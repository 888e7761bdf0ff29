// METP: memory-efficient tensor parallelism (Ou, Liang, Han, Liu and Qiao, "ParaDySe: A Parallel-Strategy
// Switching Framework for Dynamic Sequences in Transformer-based LLMs", AAAI-26, arXiv 2511.13198).
// In/out [b, s/p, h], and the activations never leave that sequence shard: the WEIGHTS move instead.
// No rank ever holds a whole weight matrix or a full-sequence activation.
//
// Attention, a two-level loop over the p head groups (group i = the a/p query and a_kv/p KV heads that
// rank i owns): broadcast group i's weights [W_qkv shard; W_proj shard] from rank i, posting group i+1's
// broadcast before group i's compute (double buffered); q_i, k|v_i = this rank's tokens through them;
// ring attention over the sequence for these heads (ring_attention.hpp: p steps, post the next K|V
// exchange, attend to the block with a mask by position, merge by log-sum-exp; zig-zag chunks when
// causal), K and V packed in one buffer so that each hop is one message; then y += out_i · W_proj_i, whose
// p row blocks sum to the whole output projection.
// MLP, a ring of weight shards (the same generic ring): at step j this rank holds [W_in shard; W_out
// shard] of rank (r−j) mod p, passes it on (double buffered) and adds act(x·W_in_jᵀ)·W_out_j to y; a_j is
// one [b, s/p, f_in/p] chunk.
// Backward: the layer always recomputes (always_recomputes(): only the layer input is kept between
// forward and backward; layer.cpp re-runs the forward first). Attention: each group's weights are
// broadcast again; the block ring runs again as in ring-flash-attention (K|V re-circulate, the fp32
// dK|dV accumulator of a block travels p−1 hops to its owner, which adds its own block's share last);
// d_x sums over the groups; group i's weight gradients from this rank's tokens are reduced onto rank i,
// which adds them to its shard's gradient. MLP: the weight ring again, the bf16 weight-gradient partial
// sums travelling one step behind the shards, so each rank's own shard gradient arrives back complete.
//
// Recomputation is always full: ctx.recompute (none, selective, full) is ignored; the pre-activation
// chunks a_j are kept through the (recomputed) layer's backward, the activation output is rebuilt.
// Constraints: only the unified layout's (Strategy::unsupported): p | a, p | a_kv, p | f.
//
// Messages per layer and rank, many and small (the attention alone: p broadcasts and p(p−1) ring steps),
// with f_in = f (GELU) or 2f (SwiGLU), all bf16 unless said:
//   forward:    p broadcasts of (2h + 2h_kv)/p·h elements (the attention weights, whole once per pass),
//               p(p−1) K|V ring steps of b·(s/p)·2h_kv/p, p−1 MLP weight ring steps of (f_in + f)/p·h;
//   recompute:  the same again;
//   backward:   p broadcasts and p reduces of (2h + 2h_kv)/p·h, p(p−1) K|V ring steps and p(p−1) fp32
//               dK|dV steps of b·(s/p)·2h_kv/p, p−1 MLP weight steps and p−1 gradient steps.
//   In all 3p broadcasts, p reduces, 4(p²−1) send/recvs. Bus bytes: 16·h·(h + h_kv) for the attention
//   weights (independent of p and s), 8(p−1)/p·(f_in + f)·h for the MLP weights, and 20(p−1)/p·b·s·h_kv
//   for K, V (three passes) and dK, dV (fp32, one pass): MegatronCZ's ring traffic, 16(p−1)/p·b·s·h_kv,
//   plus the recompute pass's K|V ring. Only that last term grows with s.
// Saved between forward and backward: the layer input only, 2·b·s·h/p bytes (its [b, s/p, h] in bf16,
// Korthikanti et al.'s 2·sbh of full recomputation split p ways). While a
// layer runs (forward, or recompute + backward) it also holds per head group q, K|V, out, lse and the p
// chunks a_j, b·(s/p)·(2h + 2h_kv + f_in) bf16 elements, but never a [b, s, ·] tensor.
#include "strategies/core_attention.hpp"
#include "strategies/library.hpp"
#include "strategies/ring_attention.hpp"
#include "strategies/zero3.hpp"

namespace paradyse {
namespace {

struct MetpAttentionSaved final : SavedActivations {
  Tensor x;  // [b, s/p, h] normalised input: every group's W_qkv gradient needs it
  // Per head group (= owner rank), what its backward needs: q [b, s/p, a/p, d], K|V packed
  // [b, s/p, 2a_kv/p, d], out, lse. They live only while their layer is recomputed.
  std::vector<ring::Saved> groups;
};

struct MlpSaved final : SavedActivations {
  Tensor x;                 // [b, s/p, h]: the W_in gradients need it
  std::vector<Tensor> pre;  // by ring step: a_j [b, s/p, f_in/p], W_in shard of rank (r − j) mod p
};

// Sizes of one head group (= one rank's share of the heads).
struct GroupDims {
  int64_t q_cols;    // h/p
  int64_t kv_cols;   // 2·h_kv/p: keys then values
  int64_t kv_heads;  // a_kv/p
  int64_t qkv_rows;  // (h + 2h_kv)/p, rows of a W_qkv shard
};

GroupDims group_dims(const ModelSpec& model, int degree) {
  const int64_t q_cols = model.hidden / degree, kv_cols = 2 * model.kv_hidden() / degree;
  return {q_cols, kv_cols, model.kv_heads / degree, q_cols + kv_cols};
}

void add_into(Backend& be, Tensor target_view, const Tensor& x) {
  be.add_(target_view, x);
}

// This rank's weight shards as one buffer with their rows stacked, so that a group's attention weights
// travel in one broadcast and an MLP shard pair in one ring step (half the messages of sending them apart).
Tensor stack_rows(Backend& be, const Tensor& top, const Tensor& bottom) {
  return be.concat({top, bottom}, 0);  // [rows_top + rows_bottom, h]
}

// The broadcasts of the p head groups' weights, group i from rank i, one in flight ahead of the group
// being computed (double buffering).
class GroupWeights {
 public:
  GroupWeights(Backend& be, const LayerWeights& w) : be_(be) {
    be_.label("attention weights");
    own_ = stack_rows(be_, w.qkv, w.proj);
    arriving_ = be_.broadcast_async(own_, 0);  // [(2h + 2h_kv)/p, h]
    if (be_.degree() == 1) own_ = Tensor();
  }

  // Group i's [W_qkv_i; W_proj_i]; posts group i+1's broadcast before returning, so that group i's
  // compute hides it. Call with i = 0, 1, …, p−1.
  Tensor take(int group) {
    be_.label("attention weights");
    Tensor weights = arriving_.wait();
    if (group + 1 < be_.degree()) {
      arriving_ = be_.broadcast_async(own_, group + 1);  // other ranks: own_ only gives the shape
      if (group + 2 == be_.degree()) own_ = Tensor();    // the last broadcast is posted
    }
    return weights;
  }

 private:
  Backend& be_;
  Tensor own_;  // this rank's stacked shards, which rank r broadcasts as group r
  Pending arriving_;
};

// One head group's ring attention backward: d_qkv [b, s/p, (h + 2h_kv)/p] in W_qkv's row order (q, k, v),
// bf16. The fp32 sums are added into one zeroed buffer rather than cast apart and concatenated; dq goes
// first, so that its adds hide the last hop of the dK|dV accumulator.
Tensor head_group_backward(Backend& be, const LayerContext& ctx, const ring::Saved& group,
                           const Tensor& d_out) {
  ring::Grads grads = ring::attention_backward(be, ctx, d_out, group);
  const int64_t b = group.q.size(0), n = group.q.size(1), d = group.q.size(3);
  const int64_t q_cols = group.q.size(2) * d, kv_cols = group.kv.kv.size(2) * d;
  Tensor d_qkv = be.zeros({b, n, q_cols + kv_cols}, DType::bf16);
  add_into(be, be.view(be.slice(d_qkv, 2, 0, q_cols), group.q.shape()),
           grads.d_q);  // [b, s/p, h/p] as [b, s/p, a/p, d]
  grads.d_q = Tensor();
  const Tensor d_kv =
      be.view(be.slice(d_qkv, 2, q_cols, kv_cols), group.kv.kv.shape());  // [b, s/p, 2a_kv/p, d]
  ring::add_into(be, ring::KvBlock::packed(d_kv), grads.take_d_kv(be));
  if (!ctx.model.rotary) return d_qkv;
  // The q and k gradients rotated back, to what W_qkv made before the rotation.
  const Positions own = ctx.layout.local(be.rank());
  const int64_t k_cols = kv_cols / 2;
  const Tensor d_q = be.view(be.slice(d_qkv, 2, 0, q_cols), group.q.shape());
  const Tensor d_k = be.view(be.slice(d_qkv, 2, q_cols, k_cols), {b, n, k_cols / d, d});
  return be.concat({be.view(core_attention::rotary_backward(be, ctx, d_q, own), {b, n, q_cols}),
                    be.view(core_attention::rotary_backward(be, ctx, d_k, own), {b, n, k_cols}),
                    be.slice(d_qkv, 2, q_cols + k_cols, k_cols)},
                   2);
}

// Keys then values [b, s/p, 2a_kv/p, d] with the keys rotated at this rank's tokens (one message per
// ring hop, as unrotated).
Tensor rotated_keys(Backend& be, const LayerContext& ctx, const Tensor& kv, const Positions& own) {
  const int64_t kv_heads = kv.size(2) / 2;
  return be.concat({core_attention::rotary(be, ctx, be.slice(kv, 2, 0, kv_heads), own),
                    be.slice(kv, 2, kv_heads, kv_heads)},
                   2);
}

// The reduction of one head group's weight gradients onto its owner, finished while the next group computes.
class GradientReduction {
 public:
  void start(Backend& be, Tensor stacked, int root) {
    be.label("attention grads");
    pending_ = be.reduce_async(stacked, root);
    sent_ = std::move(stacked);
    root_ = root;
  }
  // The owner adds the sum into its shards' gradients ([W_qkv rows; W_proj rows]).
  void finish(Backend& be, LayerWeights& grads) {
    if (!pending_.valid()) return;
    be.label("attention grads");
    Tensor sum = pending_.wait();
    sent_ = Tensor();
    if (be.rank() != root_) return;
    const int64_t qkv_rows = grads.qkv.size(0);
    be.add_(grads.qkv, be.slice(sum, 0, 0, qkv_rows));
    be.add_(grads.proj, be.slice(sum, 0, qkv_rows, grads.proj.size(0)));
  }

 private:
  Pending pending_;
  Tensor sent_;  // kept alive until the reduction completes
  int root_ = -1;
};

class Metp final : public Strategy {
 public:
  std::string_view name() const override { return "metp"; }
  std::string_view summary() const override {
    return "memory-efficient tensor parallelism: activations stay sequence-sharded, weights move "
           "(head-group broadcasts, weight ring), backward recomputes";
  }
  bool always_recomputes() const override { return true; }

  SublayerOutput attention_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                                   const Tensor& x) const override {
    const int p = be.degree();
    const GroupDims dims = group_dims(ctx.model, p);
    const int64_t b = x.size(0), n = x.size(1), d = ctx.model.head_dim();
    auto saved = std::make_unique<MetpAttentionSaved>();
    saved->x = x;
    saved->groups.resize(static_cast<std::size_t>(p));

    GroupWeights weights(be, w);
    const Positions own = ctx.model.rotary ? ctx.layout.local(be.rank()) : Positions{};
    Tensor y;  // [b, s/p, h]: the sum over groups of out_i · W_proj_i
    for (int i = 0; i < p; ++i) {
      const Tensor group_weights = weights.take(i);  // [(2h + 2h_kv)/p, h]
      ring::Saved& group = saved->groups[static_cast<std::size_t>(i)];
      be.label("qkv");
      const Tensor w_q = be.slice(group_weights, 0, 0, dims.q_cols);
      const Tensor w_kv = be.slice(group_weights, 0, dims.q_cols, dims.kv_cols);
      group.q = core_attention::rotary(be, ctx, be.view(be.linear(x, w_q), {b, n, dims.q_cols / d, d}),
                                       own);  // [b, s/p, h] → [b, s/p, a/p, d]
      // → [b, s/p, 2a_kv/p, d]: keys then values, one message per ring hop
      const Tensor kv = be.view(be.linear(x, w_kv), {b, n, 2 * dims.kv_heads, d});
      group.kv = ring::KvBlock::packed(ctx.model.rotary ? rotated_keys(be, ctx, kv, own) : kv);
      be.label("attention");
      AttentionOutput attention = ring::attention_forward(be, ctx, group.q, group.kv);
      be.label("proj");
      const Tensor w_proj = be.slice(group_weights, 0, dims.qkv_rows, dims.q_cols);  // [h/p, h]
      Tensor part =
          be.matmul(be.view(attention.out, {b, n, dims.q_cols}), w_proj);  // [b, s/p, h/p] → [b, s/p, h]
      if (!y.defined())
        y = std::move(part);
      else
        be.add_(y, part);
      group.out = std::move(attention.out);
      group.lse = std::move(attention.lse);
    }
    return {std::move(y), std::move(saved)};
  }

  Tensor attention_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                            SavedActivations& saved_base, const Tensor& d_y,
                            LayerWeights& grads) const override {
    auto& saved = saved_as<MetpAttentionSaved>(saved_base);
    const int p = be.degree();
    const GroupDims dims = group_dims(ctx.model, p);
    const int64_t b = d_y.size(0), n = d_y.size(1);

    GroupWeights weights(be, w);
    GradientReduction reduction;
    Tensor d_x;  // [b, s/p, h]: the sum over groups of d_qkv_i · W_qkv_i
    for (int i = 0; i < p; ++i) {
      const Tensor group_weights = weights.take(i);
      ring::Saved& group = saved.groups[static_cast<std::size_t>(i)];
      be.label("proj");
      const Tensor w_proj = be.slice(group_weights, 0, dims.qkv_rows, dims.q_cols);  // [h/p, h]
      Tensor d_out = be.view(be.linear(d_y, w_proj), group.out.shape());  // [b, s/p, h/p] → [b, s/p, a/p, d]
      Tensor d_w_proj = be.weight_grad(be.view(group.out, {b, n, dims.q_cols}), d_y);  // [h/p, h]
      be.label("attention");
      Tensor d_qkv = head_group_backward(be, ctx, group, d_out);  // [b, s/p, (h + 2h_kv)/p]
      d_out = Tensor();
      group = {};
      be.label("qkv");
      const Tensor w_qkv = be.slice(group_weights, 0, 0, dims.qkv_rows);  // [(h + 2h_kv)/p, h]
      Tensor part = be.matmul(d_qkv, w_qkv);                              // [b, s/p, h]
      if (!d_x.defined())
        d_x = std::move(part);
      else
        be.add_(d_x, part);
      Tensor d_w_qkv = be.weight_grad(d_qkv, saved.x);  // [(h + 2h_kv)/p, h], from this rank's tokens
      d_qkv = Tensor();
      be.label("attention grads");
      Tensor stacked = stack_rows(be, d_w_qkv, d_w_proj);  // [(2h + 2h_kv)/p, h]
      d_w_qkv = Tensor();
      d_w_proj = Tensor();
      reduction.finish(be, grads);  // the previous group's: this group's compute hid it
      reduction.start(be, std::move(stacked), i);
    }
    reduction.finish(be, grads);
    saved.x = Tensor();
    return d_x;
  }

  SublayerOutput mlp_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                             const Tensor& x) const override {
    const int64_t in_rows = w.mlp_in.size(0), out_rows = w.mlp_out.size(0);  // f_in/p, f/p
    auto saved = std::make_unique<MlpSaved>();
    saved->x = x;
    saved->pre.resize(static_cast<std::size_t>(be.degree()));
    be.label("mlp weights");
    Tensor y;  // [b, s/p, h]: the sum over shards
    // [(f_in + f)/p, h]: this rank's shard, then the ring's
    ring::for_each_block(
        be, stack_rows(be, w.mlp_in, w.mlp_out),
        [&](const ring::Step& step, const Tensor& shard) {
          be.label("mlp_in");
          Tensor pre = be.linear(x, be.slice(shard, 0, 0, in_rows));  // [b, s/p, h] → [b, s/p, f_in/p]
          be.label("activation");
          Tensor act = activation(be, ctx.model, pre);  // [b, s/p, f/p]; SwiGLU: the shard's gate | up rows
          be.label("mlp_out");
          Tensor part = be.matmul(act, be.slice(shard, 0, in_rows, out_rows));  // [b, s/p, f/p] → [b, s/p, h]
          act = Tensor();
          saved->pre[static_cast<std::size_t>(step.index)] = std::move(pre);
          if (!y.defined())
            y = std::move(part);
          else
            be.add_(y, part);
        },
        "mlp weights");
    return {std::move(y), std::move(saved)};
  }

  Tensor mlp_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w,
                      SavedActivations& saved_base, const Tensor& d_y, LayerWeights& grads) const override {
    auto& saved = saved_as<MlpSaved>(saved_base);
    const ring::Neighbours ring = ring::neighbours(be);
    const int64_t in_rows = w.mlp_in.size(0), out_rows = w.mlp_out.size(0);
    Pending grad_arriving;  // the partial gradient of the shard held next step
    Tensor grad_sent;       // kept alive until its exchange completes
    Tensor d_x;             // [b, s/p, h]
    be.label("mlp weights");
    // The same ring as forward: step j holds rank r − j's shard.
    ring::for_each_block(
        be, stack_rows(be, w.mlp_in, w.mlp_out),
        [&](const ring::Step& step, const Tensor& shard) {
          Tensor& pre = saved.pre[static_cast<std::size_t>(step.index)];
          be.label("mlp_out");
          Tensor d_act =
              be.linear(d_y, be.slice(shard, 0, in_rows, out_rows));  // [b, s/p, h] → [b, s/p, f/p]
          be.label("activation");
          Tensor act = activation(be, ctx.model, pre);  // rebuilt: cheaper than keeping p chunks of it
          be.label("mlp_out");
          Tensor d_w_out = be.weight_grad(act, d_y);  // [f/p, h]
          act = Tensor();
          be.label("activation");
          Tensor d_pre = activation_backward(be, ctx.model, d_act, pre);  // [b, s/p, f_in/p]
          d_act = Tensor();
          pre = Tensor();
          be.label("mlp_in");
          Tensor part = be.matmul(d_pre, be.slice(shard, 0, 0, in_rows));  // [b, s/p, f_in/p] → [b, s/p, h]
          if (!d_x.defined())
            d_x = std::move(part);
          else
            be.add_(d_x, part);
          Tensor d_w_in = be.weight_grad(d_pre, saved.x);  // [f_in/p, h], from this rank's tokens
          d_pre = Tensor();
          be.label("mlp grads");
          if (step.index == 0) {  // this rank's own shard: its share goes straight into its gradient
            be.add_(grads.mlp_in, d_w_in);
            be.add_(grads.mlp_out, d_w_out);
          } else {
            // The partial sum of the shard of rank r − step starts on rank r − step + 1 and follows the shard
            // one step behind: p − 1 hops, after the last of which it lands on the owner.
            Tensor partial;
            if (step.index == 1) {
              partial = stack_rows(be, d_w_in, d_w_out);  // [(f_in + f)/p, h]
            } else {
              partial = grad_arriving.wait();  // waited only now: this step's GEMMs hid it
              grad_sent = Tensor();            // that exchange has completed: its send buffer is free
              add_into(be, be.slice(partial, 0, 0, in_rows), d_w_in);
              add_into(be, be.slice(partial, 0, in_rows, out_rows), d_w_out);
            }
            grad_arriving = be.send_recv_async(partial, ring.next, ring.previous);
            grad_sent = std::move(partial);
          }
          d_w_in = Tensor();
          d_w_out = Tensor();
        },
        "mlp weights");
    saved.x = Tensor();
    if (grad_arriving.valid()) {  // this rank's shard gradient, summed over all ranks' tokens
      be.label("mlp grads");
      Tensor sum = grad_arriving.wait();
      grad_sent = Tensor();
      be.add_(grads.mlp_in, be.slice(sum, 0, 0, in_rows));
      be.add_(grads.mlp_out, be.slice(sum, 0, in_rows, out_rows));
    }
    return d_x;
  }
};

}  // namespace

const Strategy& metp() {
  static const Metp strategy;
  return strategy;
}

}  // namespace paradyse
