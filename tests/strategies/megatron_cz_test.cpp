#include "strategies/library.hpp"

#include <catch2/catch.hpp>

#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;
using namespace paradyse::testing;

namespace {

double attention_flops(const Program& program) {
  double flops = 0;
  for (const Op& op : program.ops)
    if (op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward) flops += op.flops;
  return flops;
}

int count_ops(const Program& program, OpKind kind) {
  int n = 0;
  for (const Op& op : program.ops) n += op.kind == kind ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("MegatronCZ: traced FLOPs match the closed form", "[strategies]") {
  for (const ModelSpec& model : {small_model(false), small_model(true), small_model(true, 4),
                                 small_model(true, 4, MlpKind::swiglu), wide_gqa_model(true)})
    for (int p : {1, 2, 4, 8})
      for (int64_t s : {4096, 32768})
        for (int64_t b : {1, 2}) {
          if (megatron_cz().unsupported(model, p)) continue;  // 4 KV heads over 8 ranks
          const Program program = trace_step(megatron_cz(), model, p, s, b);
          INFO("causal " << model.causal << " kv_heads " << model.kv_heads << " hidden " << model.hidden
                         << " p " << p << " s " << s << " b " << b);
          REQUIRE(layer_totals(program).flops ==
                  Approx(flash_layer_flops(model, as_double(b), as_double(s), p)).epsilon(1e-9));
        }
}

TEST_CASE("MegatronCZ: FLOPs agree with Korthikanti's 72·b·s·h² + causal-halved attention per layer",
          "[strategies]") {
  // Appendix A of Korthikanti et al. 2022 for MHA and a 4h GELU MLP: forward 24·b·s·h² + 4·b·s²·h (half of
  // the attention when causal), backward twice the GEMMs; FlashAttention's backward 2.5× its forward.
  for (bool causal : {false, true})
    for (int p : {2, 8}) {
      const ModelSpec model = small_model(causal);
      const double s = 16384, h = as_double(model.hidden);
      const double expected = (3 * 24 * s * h * h + 3.5 * 4 * s * s * h * (causal ? 0.5 : 1.0)) / p;
      INFO("causal " << causal << " p " << p);
      REQUIRE(layer_totals(trace_step(megatron_cz(), model, p, 16384)).flops ==
              Approx(expected).epsilon(0.01));
    }
}

TEST_CASE("MegatronCZ: zig-zag gives every rank the same causal attention work", "[strategies]") {
  for (int p : {2, 4, 8})
    for (int64_t s : {4096, 65536}) {
      const ModelSpec model = small_model(true);
      const Program first = trace_step(megatron_cz(), model, p, s, 1, Recompute::none, 0);
      const Program last = trace_step(megatron_cz(), model, p, s, 1, Recompute::none, p - 1);
      INFO("p " << p << " s " << s);
      // Chunks r and 2p−1−r of c = s/(2p) tokens see c²(2p−1) + c(c+1) pairs whatever r: exactly 1/p of
      // s(s+1)/2.
      const double per_rank = 3.5 * 4 * as_double(model.hidden) * attention_pairs(true, as_double(s)) / p;
      REQUIRE(attention_flops(first) == Approx(per_rank).epsilon(1e-12));
      REQUIRE(attention_flops(last) == Approx(per_rank).epsilon(1e-12));
      // No block of a zig-zag ring is entirely masked: p blocks forward and p backward on every rank.
      REQUIRE(count_ops(first, OpKind::attention_forward) == p);
      REQUIRE(count_ops(last, OpKind::attention_backward) == p);
    }
}

TEST_CASE("MegatronCZ: a non-causal model attends contiguous chunks, every block dense", "[strategies]") {
  const int p = 4;
  const int64_t s = 8192;
  const ModelSpec model = small_model(false);
  StepSpec spec;
  spec.model = &model;
  spec.tokens = s;
  const SequenceLayout layout = step_layout(spec, p);
  REQUIRE_FALSE(layout.zigzag());
  for (int rank : {0, p - 1}) {
    REQUIRE(layout.local(rank).size() == 1);
    REQUIRE(layout.local(rank)[0].begin == rank * s / p);
    const Program program = trace_step(megatron_cz(), model, p, s, 1, Recompute::none, rank);
    int blocks = 0;
    for (const Op& op : program.ops) {
      if (op.kind != OpKind::attention_forward) continue;
      ++blocks;
      REQUIRE_FALSE(op.partially_masked);
      REQUIRE(op.flops == Approx(4 * as_double(model.hidden) * as_double(s / p) * as_double(s / p)));
    }
    REQUIRE(blocks == p);
  }
}

TEST_CASE("MegatronCZ: with contiguous causal chunks, masked-out blocks are skipped but K/V still travel",
          "[strategies]") {
  // Why zig-zag: on contiguous chunks rank r's queries see only the blocks of ranks ≤ r, so rank 0 computes
  // one block and rank p−1 all p. The strategy masks by the layout's positions, whatever the layout.
  const int p = 4;
  const int64_t s = 8192, c = s / p;
  const ModelSpec model = small_model(true);
  const SequenceLayout contiguous(s, p, false);
  const LayerContext ctx{model, contiguous, 1, Recompute::none};
  for (int rank = 0; rank < p; ++rank) {
    TracingBackend be(rank, p);
    {
      ModelShards shards(be, model, 1);
      Tensor x = be.zeros({1, c, model.hidden}, DType::bf16);
      SublayerOutput out = megatron_cz().attention_forward(be, ctx, shards.layers[0], x);
      Tensor d_x = megatron_cz().attention_backward(be, ctx, shards.layers[0], *out.saved, out.y,
                                                    shards.layer_grads[0]);
      REQUIRE(d_x.shape() == x.shape());
    }
    const Program& program = be.program();
    INFO("rank " << rank);
    REQUIRE(count_ops(program, OpKind::attention_forward) == rank + 1);
    REQUIRE(count_ops(program, OpKind::attention_backward) == rank + 1);
    // Pairs: r full blocks below the diagonal plus the diagonal block's c(c+1)/2.
    const double pairs = as_double(c) * as_double(c) * rank + as_double(c) * as_double(c + 1) / 2;
    REQUIRE(attention_flops(program) == Approx(3.5 * 4 * as_double(model.hidden) * pairs));
    // K and V make p−1 hops forward and backward, the dK/dV accumulators p−1 hops: unchanged by the skips.
    REQUIRE(count_ops(program, OpKind::send_recv) == 6 * (p - 1));
  }
}

TEST_CASE("MegatronCZ: traced volume is the ring plus ZeRO-3's 3(N−1)/N·Φ_layer", "[strategies]") {
  for (const ModelSpec& model : {small_model(true), small_model(false), small_model(true, 4),
                                 small_model(true, 4, MlpKind::swiglu), wide_gqa_model(true)})
    for (int p : {2, 4, 8})
      for (int64_t s : {4096, 32768})
        for (int64_t b : {1, 2}) {
          if (megatron_cz().unsupported(model, p)) continue;  // 4 KV heads over 8 ranks
          const Totals t = layer_totals(trace_step(megatron_cz(), model, p, s, b));
          const double fraction = (p - 1.0) / p;
          const double bsh_kv = as_double(b * s * model.kv_hidden());
          INFO("causal " << model.causal << " kv_heads " << model.kv_heads << " hidden " << model.hidden
                         << " p " << p << " s " << s << " b " << b);
          // Ring, exact: K and V bf16, p−1 hops forward and p−1 backward (4 × 2 bytes), the dK and dV
          // accumulators fp32, p−1 hops (2 × 4 bytes), each hop b·(s/p)·h_kv elements: 16(p−1)/p·b·s·h_kv
          // bytes.
          const double ring_bytes = 16 * fraction * bsh_kv;
          REQUIRE(t.bus_bytes_by_kind.at(OpKind::send_recv) == Approx(ring_bytes).epsilon(1e-12));
          REQUIRE(t.count_by_kind.at(OpKind::send_recv) == 6 * (p - 1));
          // The usual ≈ 6(p−1)/p·b·s·h_kv elements counts all three circulations in bf16; ours are the same
          // hops with the dK/dV third in fp32 (ring-flash-attention's accumulators): 8/6 of it in bytes.
          REQUIRE(ring_bytes == Approx(4.0 / 3.0 * 2 * 6 * fraction * bsh_kv).epsilon(1e-12));
          // ZeRO-3, independent of s: every weight gathered forward and again backward, gradients scattered.
          const double phi_bytes = 2 * layer_matrix_elements(model);
          REQUIRE(t.bus_bytes_by_kind.at(OpKind::all_gather) ==
                  Approx(2 * fraction * phi_bytes).epsilon(1e-12));
          REQUIRE(t.bus_bytes_by_kind.at(OpKind::reduce_scatter) ==
                  Approx(fraction * phi_bytes).epsilon(1e-12));
          REQUIRE(t.count_by_kind.at(OpKind::all_gather) == 8);
          REQUIRE(t.count_by_kind.at(OpKind::reduce_scatter) == 4);
          REQUIRE(t.bus_bytes == Approx(ring_bytes + 3 * fraction * phi_bytes).epsilon(1e-12));
          // Every started communication is waited exactly once.
          REQUIRE(t.count_by_kind.at(OpKind::wait) == 6 * (p - 1) + 8 + 4);
        }
}

TEST_CASE("MegatronCZ: a group of one communicates nothing in its layers", "[strategies]") {
  const Totals t = layer_totals(trace_step(megatron_cz(), small_model(true), 1, 4096));
  REQUIRE(t.bus_bytes == 0);
  REQUIRE(t.count_by_kind.count(OpKind::send_recv) == 0);
}

TEST_CASE("MegatronCZ: the ring sends to r+1 and receives from r−1, the same sequence on every rank",
          "[strategies]") {
  // Point-to-point exchanges only match if rank r's k-th send and rank r+1's k-th receive have the same size:
  // every rank must issue the same sequence of exchanges, whatever blocks its mask skips.
  const int p = 8;
  for (bool zigzag : {true, false}) {
    const ModelSpec model = small_model(true);
    const SequenceLayout layout(4096, p, zigzag);
    const LayerContext ctx{model, layout, 1, Recompute::none};
    std::vector<double> first_sizes;
    for (int rank = 0; rank < p; ++rank) {
      TracingBackend be(rank, p);
      {
        ModelShards shards(be, model, 1);
        Tensor x = be.zeros({1, 4096 / p, model.hidden}, DType::bf16);
        SublayerOutput out = megatron_cz().attention_forward(be, ctx, shards.layers[0], x);
        Tensor d_x = megatron_cz().attention_backward(be, ctx, shards.layers[0], *out.saved, out.y,
                                                      shards.layer_grads[0]);
        REQUIRE(d_x.shape() == x.shape());
      }
      std::vector<double> sizes;
      for (const Op& op : be.program().ops) {
        if (op.kind != OpKind::send_recv) continue;
        sizes.push_back(op.size_bytes);
        REQUIRE(op.send_to == (rank + 1) % p);
        REQUIRE(op.recv_from == (rank - 1 + p) % p);
      }
      INFO("zigzag " << zigzag << " rank " << rank);
      REQUIRE(sizes.size() == 6 * (p - 1));
      if (rank == 0) first_sizes = sizes;
      REQUIRE(sizes == first_sizes);
    }
  }
}

TEST_CASE("MegatronCZ: saved activations, tensor by tensor", "[strategies]") {
  // Per local token (s/p of them, b = 1), bytes kept from a layer's forward for its backward:
  //   attention: its input 2h, q/k/v 2(h + 2h_kv) (one buffer), merged out 2h, lse 4a (fp32)
  //   MLP (zero3): its input 2h, W_in output 2·mlp_in_rows, activation output 2f
  //   (selective recomputation keeps all of it: the ring's backward needs the merged lse)
  //   layer: the two norms' fp32 statistics (8 bytes LayerNorm, 4 RMSNorm, each), h1 2h, and the layer's
  //   output 2h standing in for its input; with dropout, two u8 masks of h.
  for (const ModelSpec& base : {small_model(true), small_model(false), small_model(true, 4),
                                small_model(true, 4, MlpKind::swiglu), wide_gqa_model(true)})
    for (bool dropout : {false, true})
      for (int p : {2, 8})
        for (int64_t s : {8192, 65536}) {
          if (megatron_cz().unsupported(base, p)) continue;  // 4 KV heads over 8 ranks
          ModelSpec model = base;
          model.hidden_dropout = dropout ? 0.1 : 0.0;
          const double h = as_double(model.hidden), h_kv = as_double(model.kv_hidden());
          const double attention = 2 * h + 2 * (h + 2 * h_kv) + 2 * h + 4 * as_double(model.heads);
          const double mlp = 2 * h + 2 * as_double(model.mlp_in_rows()) + 2 * as_double(model.ffn_hidden);
          const double norm_stats = 2 * (model.norm == NormKind::layer_norm ? 8.0 : 4.0);
          const double layer = norm_stats + 2 * h + 2 * h + (dropout ? 2 * h : 0.0);
          const double tokens = as_double(s / p);
          INFO("kv_heads " << model.kv_heads << " swiglu " << (model.mlp == MlpKind::swiglu) << " dropout "
                           << dropout << " p " << p << " s " << s);
          REQUIRE(phase_memory_delta(trace_step(megatron_cz(), model, p, s), Phase::layer_forward, 0) ==
                  Approx(tokens * (attention + mlp + layer)).epsilon(1e-12));
          REQUIRE(phase_memory_delta(trace_step(megatron_cz(), model, p, s, 1, Recompute::selective),
                                     Phase::layer_forward,
                                     0) == Approx(tokens * (attention + mlp + layer)).epsilon(1e-12));
          REQUIRE(phase_memory_delta(trace_step(megatron_cz(), model, p, s, 1, Recompute::full),
                                     Phase::layer_forward, 0) == Approx(tokens * 2 * h).epsilon(1e-12));
        }
}

TEST_CASE("MegatronCZ: with MHA and GELU the saved bytes are Korthikanti's ≈ 34·sbh/c", "[strategies]") {
  // Korthikanti's 34·sbh/t (with dropout) plus FlashAttention's lse 4·a·s/c and the norms' stats 16·s/c.
  ModelSpec model = small_model(true);
  model.hidden_dropout = 0.1;
  const int p = 8;
  const int64_t s = 65536;
  const double sbh_c = as_double(s * model.hidden) / p;
  const double extras = (4.0 * as_double(model.heads) + 16) * as_double(s) / p;
  REQUIRE(phase_memory_delta(trace_step(megatron_cz(), model, p, s), Phase::layer_forward, 0) ==
          Approx(34 * sbh_c + extras).epsilon(1e-9));
}

TEST_CASE("MegatronCZ: backward frees what the forward kept", "[strategies]") {
  for (int p : {1, 4})
    for (const ModelSpec& model : {small_model(true), small_model(true, 4, MlpKind::swiglu)}) {
      const int64_t s = 16384;
      const Program program = trace_step(megatron_cz(), model, p, s);
      const double kept = phase_memory_delta(program, Phase::layer_forward, 0);
      // The backward releases the kept activations and the incoming gradient d_y [b, s/p, h], and returns d_x
      // of the same shape: net, it frees exactly what the forward kept.
      INFO("p " << p << " kv_heads " << model.kv_heads);
      REQUIRE(phase_memory_delta(program, Phase::layer_backward, 0) == Approx(-kept).epsilon(1e-12));
    }
}

TEST_CASE("MegatronCZ: constraints are only the unified layout's", "[strategies]") {
  REQUIRE_FALSE(megatron_cz().unsupported(small_model(true), 8).has_value());
  REQUIRE_FALSE(megatron_cz().unsupported(small_model(true, 4, MlpKind::swiglu), 4).has_value());
  const auto heads = megatron_cz().unsupported(small_model(true), 3);
  REQUIRE(heads.has_value());
  REQUIRE_THAT(*heads, Catch::Contains("attention heads"));
  const auto kv_heads = megatron_cz().unsupported(small_model(true, 4), 8);
  REQUIRE(kv_heads.has_value());
  REQUIRE_THAT(*kv_heads, Catch::Contains("key/value heads"));
  REQUIRE(megatron_cz().name() == "megatron_cz");
}
