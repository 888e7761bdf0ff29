#include "strategies/zero3.hpp"

#include "strategies/core_attention.hpp"

namespace paradyse {

Tensor activation(Backend& be, const ModelSpec& model, const Tensor& x) {
  return model.mlp == MlpKind::swiglu ? be.swiglu(x) : be.gelu(x);
}

Tensor activation_backward(Backend& be, const ModelSpec& model, const Tensor& d_y, const Tensor& x) {
  return model.mlp == MlpKind::swiglu ? be.swiglu_backward(d_y, x) : be.gelu_backward(d_y, x);
}

namespace zero3 {

Pending gather_async(Backend& be, const LayerWeights& w, Matrix m) {
  if (w.whole) return Pending(&be, -1, w.*m);
  return be.all_gather_async(w.*m, 0);
}

Tensor regroup(Backend& be, const LayerWeights& w, const Tensor& gathered,
               const std::vector<int64_t>& groups) {
  if (w.whole || groups.size() == 1 || be.degree() == 1) return gathered;
  // Rank-major [r0: g0 g1 g2 | r1: g0 g1 g2 | ...] → group-major [g0: r0 r1 ... | g1: ... | g2: ...].
  int64_t rows_per_rank = 0;
  for (int64_t g : groups) rows_per_rank += g;
  std::vector<Tensor> parts;
  int64_t group_start = 0;
  for (int64_t g : groups) {
    for (int r = 0; r < be.degree(); ++r)
      parts.push_back(be.slice(gathered, 0, r * rows_per_rank + group_start, g));
    group_start += g;
  }
  return be.concat(parts, 0);
}

Tensor gather(Backend& be, const LayerWeights& w, Matrix m, const std::vector<int64_t>& groups) {
  return regroup(be, w, gather_async(be, w, m).wait(), groups);
}

void scatter_grad(Backend& be, const Tensor& full_grad, const std::vector<int64_t>& groups,
                  LayerWeights& grads, Matrix m) {
  if (grads.whole) {
    be.add_(grads.*m, full_grad);
    return;
  }
  Tensor rank_major = full_grad;
  if (groups.size() > 1 && be.degree() > 1) {
    // Inverse of regroup: group-major → rank-major, so that rank r's slice is its shard.
    std::vector<Tensor> parts;
    for (int r = 0; r < be.degree(); ++r) {
      int64_t group_start = 0;
      for (int64_t g : groups) {
        parts.push_back(be.slice(full_grad, 0, group_start * be.degree() + r * g, g));
        group_start += g;
      }
    }
    rank_major = be.concat(parts, 0);
  }
  be.add_(grads.*m, be.reduce_scatter(rank_major, 0));
}

Projected project_qkv(Backend& be, const LayerContext& ctx, const LayerWeights& w, const Tensor& x) {
  const ModelSpec& model = ctx.model;
  be.label("qkv");
  const int degree = be.degree();
  Tensor weight =
      gather(be, w, &LayerWeights::qkv, LayerWeights::qkv_groups(model, degree));  // [h + 2h_kv, h]
  Tensor qkv = be.linear(x, weight);                                               // [b, s, h + 2h_kv]
  const int64_t b = x.size(0), s = x.size(1), h = model.hidden, h_kv = model.kv_hidden(),
                d = model.head_dim();
  const Positions own = model.rotary ? ctx.layout.local(be.rank()) : Positions{};
  return {core_attention::rotary(be, ctx, be.view(be.slice(qkv, 2, 0, h), {b, s, model.heads, d}), own),
          core_attention::rotary(be, ctx, be.view(be.slice(qkv, 2, h, h_kv), {b, s, model.kv_heads, d}), own),
          be.view(be.slice(qkv, 2, h + h_kv, h_kv), {b, s, model.kv_heads, d})};
}

Tensor project_qkv_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w, const Tensor& x,
                            const Tensor& d_q_rotated, const Tensor& d_k_rotated, const Tensor& d_v,
                            LayerWeights& grads) {
  const ModelSpec& model = ctx.model;
  be.label("qkv");
  const Positions own = model.rotary ? ctx.layout.local(be.rank()) : Positions{};
  const Tensor d_q = core_attention::rotary_backward(be, ctx, d_q_rotated, own);
  const Tensor d_k = core_attention::rotary_backward(be, ctx, d_k_rotated, own);
  const int degree = be.degree();
  const std::vector<int64_t> groups = LayerWeights::qkv_groups(model, degree);
  const int64_t b = x.size(0), s = x.size(1);
  Tensor d_qkv = be.concat({be.view(d_q, {b, s, model.hidden}), be.view(d_k, {b, s, model.kv_hidden()}),
                            be.view(d_v, {b, s, model.kv_hidden()})},
                           2);  // [b, s, h + 2h_kv]
  Tensor weight = gather(be, w, &LayerWeights::qkv, groups);
  Tensor d_x = be.matmul(d_qkv, weight);  // [b, s, h]
  weight = Tensor();
  scatter_grad(be, be.weight_grad(d_qkv, x), groups, grads, &LayerWeights::qkv);
  return d_x;
}

Tensor project_out(Backend& be, const ModelSpec& model, const Tensor& w_proj, const Tensor& o) {
  be.label("proj");
  return be.matmul(be.view(o, {o.size(0), o.size(1), model.hidden}), w_proj);  // [b, s, h]
}

Tensor project_out_backward(Backend& be, const ModelSpec& model, const LayerWeights& w, const Tensor& o,
                            const Tensor& d_y, LayerWeights& grads) {
  be.label("proj");
  Tensor weight = gather(be, w, &LayerWeights::proj, {w.proj.size(0)});
  Tensor d_o = be.linear(d_y, weight);  // [b, s, h]
  weight = Tensor();
  const Tensor o_flat = be.view(o, {o.size(0), o.size(1), model.hidden});
  scatter_grad(be, be.weight_grad(o_flat, d_y), {w.proj.size(0)}, grads, &LayerWeights::proj);
  return be.view(d_o, o.shape());
}

namespace {

struct MlpSaved final : SavedActivations {
  Tensor x;    // input [b, s, h]
  Tensor pre;  // W_in output [b, s, f_in]: the activation's input
  Tensor act;  // activation output [b, s, f]
};

}  // namespace

SublayerOutput mlp_forward(Backend& be, const LayerContext& ctx, const LayerWeights& w, const Tensor& x) {
  const ModelSpec& model = ctx.model;
  auto saved = std::make_unique<MlpSaved>();
  be.label("mlp_in");
  Tensor w_in = gather(be, w, &LayerWeights::mlp_in, LayerWeights::mlp_in_groups(model, be.degree()));
  Pending w_out = gather_async(be, w, &LayerWeights::mlp_out);  // prefetch: hidden behind the first GEMM
  saved->x = x;
  saved->pre = be.linear(x, w_in);
  w_in = Tensor();
  be.label("activation");
  Tensor act = activation(be, model, saved->pre);
  be.label("mlp_out");
  Tensor y = be.matmul(act, w_out.wait());
  saved->act = std::move(act);
  return {std::move(y), std::move(saved)};
}

Tensor mlp_backward(Backend& be, const LayerContext& ctx, const LayerWeights& w, SavedActivations& saved_base,
                    const Tensor& d_y, LayerWeights& grads) {
  const ModelSpec& model = ctx.model;
  auto& saved = saved_as<MlpSaved>(saved_base);
  const std::vector<int64_t> in_groups = LayerWeights::mlp_in_groups(model, be.degree());
  be.label("mlp_out");
  Tensor w_out = gather(be, w, &LayerWeights::mlp_out, {w.mlp_out.size(0)});
  Pending w_in = gather_async(be, w, &LayerWeights::mlp_in);  // prefetch for the dgrad below
  Tensor d_act = be.linear(d_y, w_out);                       // [b, s, f]
  w_out = Tensor();
  scatter_grad(be, be.weight_grad(saved.act, d_y), {w.mlp_out.size(0)}, grads, &LayerWeights::mlp_out);
  saved.act = Tensor();
  be.label("activation");
  Tensor d_pre = activation_backward(be, model, d_act, saved.pre);
  d_act = Tensor();
  saved.pre = Tensor();
  be.label("mlp_in");
  Tensor d_x = be.matmul(d_pre, regroup(be, w, w_in.wait(), in_groups));  // [b, s, h]
  scatter_grad(be, be.weight_grad(d_pre, saved.x), in_groups, grads, &LayerWeights::mlp_in);
  return d_x;
}

}  // namespace zero3
}  // namespace paradyse
