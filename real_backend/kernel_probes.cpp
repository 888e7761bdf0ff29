#include "real_backend/kernel_probes.hpp"

#include <algorithm>
#include <optional>

#include "program/tracing_backend.hpp"
#include "strategies/training_step.hpp"

namespace paradyse::real {
namespace {

// Sequence length of point `point`: 64, 128, ... doubling, then max_tokens itself; none beyond.
std::optional<int64_t> tokens_at(int point, int64_t max_tokens) {
  int64_t s = std::min<int64_t>(64, max_tokens);
  for (int i = 0; i < point; ++i) {
    if (s == max_tokens) return std::nullopt;
    s = std::min(2 * s, max_tokens);
  }
  return s;
}

struct Shapes {
  int64_t h, f, heads, head_dim, vocab;
  NormKind norm;
};

// A probe over sequence lengths: `make(be, s)` returns the call at s tokens.
KernelProbe by_tokens(Kernel kernel, int64_t max_tokens, std::function<KernelCall(Backend&, int64_t)> make) {
  return {kernel, false, [max_tokens, make = std::move(make)](Backend& be, int point) -> KernelCall {
            const std::optional<int64_t> s = tokens_at(point, max_tokens);
            return s ? make(be, *s) : KernelCall();
          }};
}

AttentionMask causal_mask(int64_t s) {
  const Positions all{TokenRange{0, s}};
  return {true, all, all, nullptr};
}

}  // namespace

std::vector<KernelProbe> kernel_probes(const ModelSpec& model, int degree, int64_t max_tokens) {
  // Local shapes as a rank of `degree` sees them: its heads, its slice of the MLP, the whole
  // (padded) vocabulary for the loss and the embedding's gradient.
  const Shapes x{model.hidden,
                 std::max<int64_t>(1, model.ffn_hidden / degree),
                 std::max<int64_t>(1, model.heads / degree),
                 model.head_dim(),
                 padded_vocab(model, degree),
                 model.norm};
  const DType bf16 = DType::bf16;
  std::vector<KernelProbe> probes;
  auto add = [&](Kernel kernel, std::function<KernelCall(Backend&, int64_t)> make) {
    probes.push_back(by_tokens(kernel, max_tokens, std::move(make)));
  };
  auto hidden = [x, bf16](Backend& be, int64_t s) { return be.zeros({1, s, x.h}, bf16); };
  auto heads = [x, bf16](Backend& be, int64_t s) { return be.zeros({1, s, x.heads, x.head_dim}, bf16); };
  auto scores = [x, bf16](Backend& be, int64_t s) { return be.zeros({1, x.heads, s, s}, bf16); };

  add(Kernel::zeros, [x, bf16](Backend& be, int64_t s) -> KernelCall {
    return [&be, x, s, bf16] { be.zeros({1, s, x.h}, bf16); };
  });
  add(Kernel::cast, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, t = hidden(be, s)] { be.cast(t, DType::fp32); };
  });
  add(Kernel::concat, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, parts = std::vector<Tensor>{hidden(be, s), hidden(be, s)}] { be.concat(parts, 1); };
  });
  add(Kernel::merge_attention, [=](Backend& be, int64_t s) -> KernelCall {
    auto lse = [&] { return be.zeros({1, x.heads, s}, DType::fp32); };
    return [&be, out = heads(be, s), l = lse(), block = AttentionOutput{heads(be, s), lse()}]() mutable {
      be.merge_attention(out, l, block);
    };
  });
  add(Kernel::scores, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, q = heads(be, s), k = heads(be, s)] { be.scores(q, k); };
  });
  add(Kernel::scores_times, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, p = scores(be, s), v = heads(be, s)] { be.scores_times(p, v); };
  });
  add(Kernel::scores_transposed_times, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, p = scores(be, s), d = heads(be, s)] { be.scores_transposed_times(p, d); };
  });
  add(Kernel::softmax, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, t = scores(be, s), mask = causal_mask(s), x] {
      be.softmax(t, 1.0 / static_cast<double>(x.head_dim), mask);
    };
  });
  add(Kernel::softmax_backward, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, d = scores(be, s), p = scores(be, s)] { be.softmax_backward(d, p, 1.0); };
  });
  auto norm_weights = [x, bf16](Backend& be) {
    return std::pair{be.zeros({x.h}, bf16),
                     x.norm == NormKind::layer_norm ? be.zeros({x.h}, bf16) : Tensor()};
  };
  add(Kernel::norm_forward, [=](Backend& be, int64_t s) -> KernelCall {
    return
        [&be, t = hidden(be, s), w = norm_weights(be), x] { be.norm_forward(t, w.first, w.second, x.norm); };
  });
  add(Kernel::norm_backward, [=](Backend& be, int64_t s) -> KernelCall {
    const Tensor t = hidden(be, s);
    const auto w = norm_weights(be);
    return [&be, t, w, d = hidden(be, s), saved = be.norm_forward(t, w.first, w.second, x.norm), x] {
      be.norm_backward(d, t, w.first, saved, x.norm);
    };
  });
  auto mlp = [x, bf16](Backend& be, int64_t s, int64_t width) { return be.zeros({1, s, width * x.f}, bf16); };
  add(Kernel::gelu,
      [=](Backend& be, int64_t s) -> KernelCall { return [&be, t = mlp(be, s, 1)] { be.gelu(t); }; });
  add(Kernel::gelu_backward, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, d = mlp(be, s, 1), t = mlp(be, s, 1)] { be.gelu_backward(d, t); };
  });
  add(Kernel::swiglu,
      [=](Backend& be, int64_t s) -> KernelCall { return [&be, t = mlp(be, s, 2)] { be.swiglu(t); }; });
  add(Kernel::swiglu_backward, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, d = mlp(be, s, 1), t = mlp(be, s, 2)] { be.swiglu_backward(d, t); };
  });
  auto rotary_at = [theta = model.rope_theta](int64_t s) {
    return RotaryPositions{{TokenRange{0, s}}, nullptr, theta};
  };
  add(Kernel::rotary, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, t = heads(be, s), at = rotary_at(s)] { be.rotary(t, at); };
  });
  add(Kernel::rotary_backward, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, d = heads(be, s), at = rotary_at(s)] { be.rotary_backward(d, at); };
  });
  add(Kernel::dropout, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, t = hidden(be, s)] { be.dropout(t, 0.1, MaskStream::per_rank); };
  });
  add(Kernel::dropout_backward, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, d = hidden(be, s), mask = be.dropout(hidden(be, s), 0.1, MaskStream::per_rank).mask] {
      be.dropout_backward(d, mask, 0.1);
    };
  });
  add(Kernel::add, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, a = hidden(be, s), b = hidden(be, s)] { be.add(a, b); };
  });
  add(Kernel::add_, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, a = hidden(be, s), b = hidden(be, s)]() mutable { be.add_(a, b); };
  });
  auto tokens = [](Backend& be, int64_t s) { return be.zeros({1, s}, DType::int64); };
  add(Kernel::embedding, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, t = tokens(be, s), table = be.zeros({x.vocab, x.h}, bf16)] { be.embedding(t, table, 0); };
  });
  add(Kernel::embedding_backward, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, d = hidden(be, s), t = tokens(be, s), x] { be.embedding_backward(d, t, x.vocab, 0); };
  });
  add(Kernel::cross_entropy, [=](Backend& be, int64_t s) -> KernelCall {
    return
        [&be, logits = be.zeros({1, s, x.vocab}, bf16), t = tokens(be, s)] { be.cross_entropy(logits, t); };
  });

  // The gradient norm and the clip read (and write) fp32 gradients.
  auto gradient = [x](Backend& be, int64_t s) { return be.zeros({1, s, x.h}, DType::fp32); };
  add(Kernel::sum_of_squares, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, g = gradient(be, s)] { be.sum_of_squares({g}, 1.0); };
  });
  add(Kernel::scale_, [=](Backend& be, int64_t s) -> KernelCall {
    return [&be, g = gradient(be, s)] { be.scale_({g}, 0.5); };
  });

  // Adam on the shard of each weight one layer and the embedding have, smallest first.
  probes.push_back(
      {Kernel::adam_step, true, [model](Backend& be, int point) -> KernelCall {
         auto shards = std::make_shared<ModelShards>(be, model, 1);
         const LayerWeights& layer = shards->layers[0];
         std::vector<std::pair<int64_t, Tensor>> weights;
         for (const Tensor& w :
              {layer.norm1_gamma, layer.proj, layer.qkv, layer.mlp_out, layer.mlp_in, shards->embedding})
           weights.emplace_back(w.numel(), w);
         std::sort(weights.begin(), weights.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
         weights.erase(std::unique(weights.begin(), weights.end(),
                                   [](const auto& a, const auto& b) { return a.first == b.first; }),
                       weights.end());
         if (point >= static_cast<int>(weights.size())) return {};
         Tensor w = weights[static_cast<std::size_t>(point)].second;
         return [&be, shards, w, grad = be.gradient_buffer(w.shape())]() mutable { be.adam_step(w, grad); };
       }});
  return probes;
}

std::optional<double> traced_size(const KernelProbe& probe, int point, int degree) {
  TracingBackend tracer(0, degree);
  const KernelCall call = probe.prepare(tracer, point);
  if (!call) return std::nullopt;
  const std::size_t first = tracer.program().ops.size();
  call();
  double size = 0;
  for (std::size_t i = first; i < tracer.program().ops.size(); ++i) {
    const Op& op = tracer.program().ops[i];
    if (op.kernel == probe.kernel)
      size += call_info(probe.kernel).size == CallSize::flops ? op.flops : op.memory_bytes;
  }
  return size;
}

}  // namespace paradyse::real
