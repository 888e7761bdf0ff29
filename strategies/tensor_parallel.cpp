#include "strategies/tensor_parallel.hpp"

#include <optional>

#include "strategies/zero3.hpp"

namespace paradyse::tensor_parallel {

Tensor Ends::whole_sequence(Backend& be, const Tensor& x) const {
  return sequence_parallel ? be.all_gather(x, 1) : x;
}

Tensor Ends::sum_partials(Backend& be, const Tensor& partial) const {
  return sequence_parallel ? be.reduce_scatter(partial, 1) : be.all_reduce(partial);
}

Tensor Ends::input_grad_behind_weight_grad(Backend& be, const Tensor& d_out, const Tensor& w, const Tensor& x,
                                           const WeightGradSink& grad) const {
  std::optional<Pending> x_full;
  if (sequence_parallel) x_full.emplace(be.all_gather_async(x, 1));
  Tensor partial = be.matmul(d_out, w);  // [b, s, h]
  Pending d_x = sequence_parallel ? be.reduce_scatter_async(partial, 1) : be.all_reduce_async(partial);
  partial = Tensor();
  grad(be.weight_grad(d_out, x_full ? x_full->wait() : x));
  return d_x.wait();
}

HeadViews split_heads(Backend& be, const ModelSpec& model, const Tensor& qkv) {
  const int p = be.degree();
  const int64_t b = qkv.size(0), s = qkv.size(1), d = model.head_dim();
  const int64_t heads = model.heads / p, kv_heads = model.kv_heads / p;
  return {be.view(be.slice(qkv, 2, 0, heads * d), {b, s, heads, d}),
          be.view(be.slice(qkv, 2, heads * d, kv_heads * d), {b, s, kv_heads, d}),
          be.view(be.slice(qkv, 2, (heads + kv_heads) * d, kv_heads * d), {b, s, kv_heads, d})};
}

Tensor join_heads(Backend& be, const Tensor& d_q, const Tensor& d_k, const Tensor& d_v) {
  const int64_t b = d_q.size(0), s = d_q.size(1);
  return be.concat(
      {be.view(d_q, {b, s, d_q.size(2) * d_q.size(3)}), be.view(d_k, {b, s, d_k.size(2) * d_k.size(3)}),
       be.view(d_v, {b, s, d_v.size(2) * d_v.size(3)})},
      2);
}

SublayerOutput mlp_forward(Backend& be, const ModelSpec& model, const Ends& ends, const Tensor& w_in,
                           const Tensor& w_out, const Tensor& x) {
  auto saved = std::make_unique<MlpSaved>();
  saved->x = x;
  be.label("mlp_in");
  saved->pre = be.linear(ends.whole_sequence(be, x), w_in);  // [b, s, f_in/p]
  be.label("activation");
  Tensor act = activation(be, model, saved->pre);  // [b, s, f/p]
  be.label("mlp_out");
  Tensor y = ends.sum_partials(be, be.matmul(act, w_out));
  saved->act = std::move(act);
  return {std::move(y), std::move(saved)};
}

WeightGradSink add_into(Backend& be, Tensor& grad) {
  return [&be, &grad](const Tensor& weight_grad) { be.add_(grad, weight_grad); };
}

Tensor mlp_backward(Backend& be, const ModelSpec& model, const Ends& ends, const Tensor& w_in,
                    const Tensor& w_out, MlpSaved& saved, const Tensor& d_y, const WeightGradSink& grad_in,
                    const WeightGradSink& grad_out) {
  be.label("mlp_out");
  Tensor d_y_full = ends.whole_sequence(be, d_y);  // [b, s, h]
  Tensor d_act = be.linear(d_y_full, w_out);       // [b, s, f/p]
  grad_out(be.weight_grad(saved.act, d_y_full));
  saved.act = Tensor();
  d_y_full = Tensor();
  be.label("activation");
  Tensor d_pre = activation_backward(be, model, d_act, saved.pre);
  d_act = Tensor();
  saved.pre = Tensor();
  be.label("mlp_in");
  return ends.input_grad_behind_weight_grad(be, d_pre, w_in, saved.x, grad_in);
}

}  // namespace paradyse::tensor_parallel
