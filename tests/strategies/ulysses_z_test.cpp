#include <catch2/catch.hpp>

#include "strategies/library.hpp"
#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;
using namespace paradyse::testing;

namespace {

// The shapes the tests sweep: MHA, GQA with 8 and 4 key/value heads, and SwiGLU with GQA, each
// causal (zig-zag layout) and not.
std::vector<ModelSpec> test_models() {
  std::vector<ModelSpec> models;
  for (bool causal : {false, true}) {
    models.push_back(small_model(causal));
    models.push_back(small_model(causal, 8));
    models.push_back(small_model(causal, 4));
    models.push_back(small_model(causal, 8, MlpKind::swiglu));
    models.push_back(small_model(causal, 4, MlpKind::swiglu));
  }
  return models;
}

bool supported(const ModelSpec& model, int p) {
  return !ulysses_z().unsupported(model, p).has_value();
}

// What one layer's forward keeps, per tensor, in bytes (bf16 activations, fp32 statistics and lse,
// u8 dropout masks); `tokens` = b·s/p, this rank's tokens.
double saved_layer_bytes(const ModelSpec& m, int64_t b, int64_t s, int p, Recompute recompute) {
  const double tokens = as_double(b * s / p), h = as_double(m.hidden), h_kv = as_double(m.kv_hidden()),
               f = as_double(m.ffn_hidden);
  if (recompute == Recompute::full) return 2 * tokens * h;  // the layer's output, standing in for its input
  // Selective recomputation keeps nothing of the flash core: it runs again in backward.
  const double core = recompute == Recompute::none ? 2 * tokens * h  // out [b, s, a/p, d]
                                                         + 4 * tokens * as_double(m.heads)  // lse, fp32
                                                   : 0;
  const double attention = 2 * tokens * h                       // x [b, s/p, h]: W_qkv gradient
                           + 2 * tokens * (h + 2 * h_kv)        // q, k, v [b, s, (a | a_kv)/p, d]
                           + core + 2 * tokens * h;             // o [b, s/p, a, d]: W_proj gradient
  const double mlp = 2 * tokens * h                             // x [b, s/p, h]
                     + 2 * tokens * as_double(m.mlp_in_rows())  // W_in output [b, s/p, f or 2f]
                     + 2 * tokens * f;                          // activation output
  const double stats = (m.norm == NormKind::layer_norm ? 8 : 4) * tokens;  // per norm: mean, 1/std or rms
  const double masks = m.hidden_dropout > 0 ? 2 * tokens * h : 0;          // two u8 dropout masks
  const double layer = 2 * stats + 2 * tokens * h /* h1 */ + masks + 2 * tokens * h /* output */;
  return attention + mlp + layer;
}

std::vector<const Op*> ops_of(const Program& program, Phase phase, OpKind kind) {
  std::vector<const Op*> found;
  for (const Op& op : program.ops)
    if (op.phase == phase && op.kind == kind) found.push_back(&op);
  return found;
}

}  // namespace

TEST_CASE("UlyssesZ: traced FLOPs match the closed form", "[strategies]") {
  for (const ModelSpec& model : test_models())
    for (int p : {1, 2, 4, 8})
      for (int64_t s : {4096, 32768}) {
        if (!supported(model, p)) continue;
        INFO("causal " << model.causal << " kv_heads " << model.kv_heads << " swiglu "
                       << (model.mlp == MlpKind::swiglu) << " p " << p << " s " << s);
        const Program program = trace_step(ulysses_z(), model, p, s);
        REQUIRE(layer_totals(program).flops ==
                Approx(flash_layer_flops(model, 1, as_double(s), p)).epsilon(0.01));
      }
}

TEST_CASE("UlyssesZ: attention runs on a/p heads over the whole sequence, causal pairs exactly",
          "[strategies]") {
  for (const ModelSpec& model : test_models())
    for (int p : {2, 4, 8}) {
      if (!supported(model, p)) continue;
      const int64_t s = 8192, b = 2;
      INFO("causal " << model.causal << " kv_heads " << model.kv_heads << " p " << p);
      // A causal mask over positions 0..s−1 computes s(s+1)/2 pairs whatever the chunk order.
      const double pairs = model.causal ? as_double(s) * as_double(s + 1) / 2 : as_double(s) * as_double(s);
      const double forward = 4 * as_double(b) * as_double(model.hidden / p) * pairs;
      double rank_flops[2] = {0, 0};
      for (int which : {0, 1}) {
        const Program program =
            trace_step(ulysses_z(), model, p, s, b, Recompute::none, which == 0 ? 0 : p - 1);
        const auto fwd = ops_of(program, Phase::layer_forward, OpKind::attention_forward);
        const auto bwd = ops_of(program, Phase::layer_backward, OpKind::attention_backward);
        REQUIRE(fwd.size() == 1);
        REQUIRE(bwd.size() == 1);
        REQUIRE(fwd[0]->dims == std::array<int64_t, 4>{b * model.heads / p, s, s, model.head_dim()});
        REQUIRE(fwd[0]->flops == Approx(forward).epsilon(1e-12));
        REQUIRE(bwd[0]->flops == Approx(2.5 * forward).epsilon(1e-12));
        REQUIRE(fwd[0]->partially_masked == model.causal);
        rank_flops[which] = layer_totals(program).flops;
      }
      // Heads split the work evenly: the first and last rank do the same, causal or not.
      REQUIRE(rank_flops[0] == rank_flops[1]);
    }
}

TEST_CASE("UlyssesZ: traced volume is 2(p−1)/p²·b·s·(2h + 2h_kv) + 3(p−1)/p·Φ_layer", "[strategies]") {
  for (const ModelSpec& model : test_models())
    for (int p : {2, 4, 8})
      for (int64_t s : {2048, 16384})
        for (int64_t b : {1, 2}) {
          if (!supported(model, p)) continue;
          INFO("causal " << model.causal << " kv_heads " << model.kv_heads << " swiglu "
                         << (model.mlp == MlpKind::swiglu) << " p " << p << " s " << s << " b " << b);
          const double h = as_double(model.hidden), h_kv = as_double(model.kv_hidden()),
                       phi = layer_matrix_elements(model);
          const double fraction = static_cast<double>(p - 1) / p;
          // All-to-all: 4 forward + 4 backward, each moving (p−1)/p of its per-rank b·s/p·(h or h_kv).
          const double all_to_all = 2 * fraction / p * as_double(b * s) * (2 * h + 2 * h_kv);
          // ZeRO-3: each matrix gathered in forward and again in backward, its gradient reduce-scattered.
          const double all_gather = 2 * fraction * phi, reduce_scatter = fraction * phi;
          for (int rank : {0, p - 1}) {
            const Totals t = layer_totals(trace_step(ulysses_z(), model, p, s, b, Recompute::none, rank));
            REQUIRE(t.bus_bytes_by_kind.at(OpKind::all_to_all) ==
                    Approx(2 * all_to_all).epsilon(1e-12));  // bf16
            REQUIRE(t.bus_bytes_by_kind.at(OpKind::all_gather) == Approx(2 * all_gather).epsilon(1e-12));
            REQUIRE(t.bus_bytes_by_kind.at(OpKind::reduce_scatter) ==
                    Approx(2 * reduce_scatter).epsilon(1e-12));
            REQUIRE(t.bus_bytes == Approx(2 * (all_to_all + 3 * fraction * phi)).epsilon(1e-12));
            REQUIRE(t.count_by_kind.at(OpKind::all_to_all) == 8);
            REQUIRE(t.count_by_kind.at(OpKind::all_gather) == 8);
            REQUIRE(t.count_by_kind.at(OpKind::reduce_scatter) == 4);
          }
        }
}

TEST_CASE("UlyssesZ: all-to-all sizes follow q, k, v, out forward and d_out, d_q, d_k, d_v backward",
          "[strategies]") {
  for (const ModelSpec& model : test_models()) {
    const int p = 4;
    const int64_t s = 4096, b = 2;
    INFO("causal " << model.causal << " kv_heads " << model.kv_heads);
    const Program program = trace_step(ulysses_z(), model, p, s, b);
    // Per-rank buffers of b·s/p tokens: query width h, key/value width h_kv, bf16.
    const double q = 2 * as_double(b * s / p * model.hidden),
                 kv = 2 * as_double(b * s / p * model.kv_hidden());
    const std::vector<double> forward{q, kv, kv, q}, backward{q, q, kv, kv};
    std::vector<double> traced_forward, traced_backward;
    for (const Op* op : ops_of(program, Phase::layer_forward, OpKind::all_to_all))
      traced_forward.push_back(op->size_bytes);
    for (const Op* op : ops_of(program, Phase::layer_backward, OpKind::all_to_all))
      traced_backward.push_back(op->size_bytes);
    REQUIRE(traced_forward == forward);
    REQUIRE(traced_backward == backward);
  }
}

TEST_CASE("UlyssesZ: degree 1 communicates nothing", "[strategies]") {
  for (const ModelSpec& model : test_models()) {
    const Totals t = layer_totals(trace_step(ulysses_z(), model, 1, 4096));
    REQUIRE(t.bus_bytes == 0);
    for (OpKind kind : {OpKind::all_to_all, OpKind::all_gather, OpKind::reduce_scatter, OpKind::wait})
      REQUIRE(t.count_by_kind.count(kind) == 0);
  }
}

TEST_CASE("UlyssesZ: the W_proj gather is prefetched behind attention", "[strategies]") {
  const Program program = trace_step(ulysses_z(), small_model(true, 8), 8, 16384);
  std::size_t attention = 0, gather = 0, wait = 0;
  bool found_gather = false, found_wait = false;
  for (std::size_t i = 0; i < program.ops.size(); ++i) {
    const Op& op = program.ops[i];
    if (op.phase != Phase::layer_forward) continue;
    if (op.kind == OpKind::attention_forward) attention = i;
    if (op.kind == OpKind::all_gather && program.label(op) == "proj") {
      gather = i;
      found_gather = true;
    }
  }
  REQUIRE(found_gather);
  for (std::size_t i = 0; i < program.ops.size(); ++i) {
    const Op& op = program.ops[i];
    if (op.kind == OpKind::wait && op.deps == OpDeps{static_cast<OpId>(gather)}) {
      wait = i;
      found_wait = true;
    }
  }
  REQUIRE(found_wait);
  REQUIRE(gather < attention);
  REQUIRE(attention < wait);
}

TEST_CASE("UlyssesZ: saved activations match the per-tensor accounting", "[strategies]") {
  for (const ModelSpec& base : test_models())
    for (int p : {2, 4, 8})
      for (int64_t s : {8192, 65536})
        for (double dropout : {0.0, 0.1})
          for (Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
            if (!supported(base, p)) continue;
            ModelSpec model = base;
            model.hidden_dropout = dropout;
            const int64_t b = 2;
            INFO("causal " << model.causal << " kv_heads " << model.kv_heads << " swiglu "
                           << (model.mlp == MlpKind::swiglu) << " p " << p << " s " << s << " dropout "
                           << dropout << " recompute " << to_string(recompute));
            REQUIRE(phase_memory_delta(trace_step(ulysses_z(), model, p, s, b, recompute),
                                       Phase::layer_forward, 0) ==
                    Approx(saved_layer_bytes(model, b, s, p, recompute)).epsilon(1e-12));
          }
}

TEST_CASE("UlyssesZ: MHA with a GELU MLP keeps Korthikanti's ≈ 34·sbh/p per layer", "[strategies]") {
  // Korthikanti's 34·sbh counts dropout masks; with FlashAttention and no dropout Megatron keeps 32·sbh/t.
  // Ulysses keeps the attention output twice, head-sharded for FlashAttention's backward and
  // sequence-sharded for the W_proj gradient (+2·sbh/p), which lands on 34·sbh/p; beyond that come the lse
  // (4·a·s·b/p bytes) and the two norms' fp32 statistics (2 × 8·s·b/p).
  for (int p : {2, 4, 8})
    for (int64_t s : {8192, 65536}) {
      const ModelSpec model = small_model(true);
      const double sbh_p = as_double(s * model.hidden) / p;
      const double extras = (4.0 * as_double(model.heads) * as_double(s) + 2 * 8.0 * as_double(s)) / p;
      INFO("p " << p << " s " << s);
      REQUIRE(phase_memory_delta(trace_step(ulysses_z(), model, p, s), Phase::layer_forward, 0) ==
              Approx(34 * sbh_p + extras).epsilon(1e-12));
    }
}

TEST_CASE("UlyssesZ: recomputation keeps less", "[strategies]") {
  const ModelSpec model = small_model(true, 8, MlpKind::swiglu);
  const int p = 8;
  const int64_t s = 16384;
  const double none = phase_memory_delta(trace_step(ulysses_z(), model, p, s), Phase::layer_forward, 0);
  const double selective = phase_memory_delta(trace_step(ulysses_z(), model, p, s, 1, Recompute::selective),
                                              Phase::layer_forward, 0);
  const double full =
      phase_memory_delta(trace_step(ulysses_z(), model, p, s, 1, Recompute::full), Phase::layer_forward, 0);
  // Selective recomputes the flash core: drops its output in head layout and its lse, [b, s, a/p, d] and
  // [b, a/p, s] fp32, and runs its forward once more.
  REQUIRE(
      none - selective ==
      Approx(as_double(s / p) * (2 * as_double(model.hidden) + 4 * as_double(model.heads))).epsilon(1e-12));
  REQUIRE(layer_totals(trace_step(ulysses_z(), model, p, s, 1, Recompute::selective))
              .count_by_kind.at(OpKind::attention_forward) == 2);
  REQUIRE(full == Approx(2 * as_double(s / p * model.hidden)).epsilon(1e-12));
  // Full recomputation runs the forward again, all-to-alls and weight gathers included.
  const Totals plain = layer_totals(trace_step(ulysses_z(), model, p, s));
  const Totals again = layer_totals(trace_step(ulysses_z(), model, p, s, 1, Recompute::full));
  REQUIRE(again.count_by_kind.at(OpKind::all_to_all) == 12);
  REQUIRE(again.count_by_kind.at(OpKind::all_gather) == 12);
  REQUIRE(again.flops > plain.flops * 1.25);
}

TEST_CASE("UlyssesZ: the degree must divide the query and key/value heads", "[strategies]") {
  // Llama-like GQA with 4 key/value heads cannot be split 8 ways by head.
  const auto gqa = ulysses_z().unsupported(small_model(true, 4), 8);
  REQUIRE(gqa.has_value());
  REQUIRE_THAT(*gqa, Catch::StartsWith("Ulysses degree 8 must divide the 4 key/value heads"));
  const auto heads = ulysses_z().unsupported(small_model(false), 32);
  REQUIRE(heads.has_value());
  REQUIRE_THAT(*heads, Catch::StartsWith("Ulysses degree 32 must divide the 16 attention heads"));
  const auto three = ulysses_z().unsupported(small_model(true, 8), 3);
  REQUIRE(three.has_value());
  REQUIRE_THAT(*three, Catch::StartsWith("Ulysses degree 3 must divide the 16 attention heads"));
  // Conditions that are not about heads keep the unified layout's own message.
  ModelSpec odd_ffn = small_model(true);
  odd_ffn.ffn_hidden = 4100;
  REQUIRE(ulysses_z().unsupported(odd_ffn, 8) == megatron_ts().unsupported(odd_ffn, 8));
  REQUIRE(ulysses_z().unsupported(odd_ffn, 8).has_value());
  REQUIRE(ulysses_z().unsupported(small_model(true), 0) == megatron_ts().unsupported(small_model(true), 0));
  // Supported: p divides both head counts.
  REQUIRE_FALSE(ulysses_z().unsupported(small_model(true, 8), 8).has_value());
  REQUIRE_FALSE(ulysses_z().unsupported(small_model(true, 4), 4).has_value());
  REQUIRE_FALSE(ulysses_z().unsupported(small_model(true, 4, MlpKind::swiglu), 4).has_value());
  REQUIRE_FALSE(ulysses_z().unsupported(small_model(false), 1).has_value());
}
