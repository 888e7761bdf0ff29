#include "strategies/library.hpp"

#include <catch2/catch.hpp>

#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;
using namespace paradyse::testing;

namespace {

// Per-layer FLOPs of ColossalZ on one rank. GEMMs: forward plus a backward of twice the forward.
// Unfused attention (Korthikanti et al. 2022, App. A): forward q·kᵀ and P·v, 2·b·a·(s/p)·s·d each,
// 4·b·s²·h/p in all; backward d_P = d_o·vᵀ, dV = Pᵀ·d_o, dq = d_S·k, dK = d_Sᵀ·q, twice the forward.
// The FULL s² even when causal: the mask zeroes probabilities but skips no work in unfused attention.
// Selective recomputation adds the forward's q·kᵀ again (2·b·s²·h/p).
double closed_form_layer_flops(const ModelSpec& m, double b, double s, int p, Recompute recompute) {
  const auto h = static_cast<double>(m.hidden);
  const double attention_forward = 4 * b * s * s * h / p;
  const double recomputed = recompute == Recompute::selective ? attention_forward / 2 : 0;
  return 3 * gemm_forward_flops(m, b * s / p) + 3 * attention_forward + recomputed;
}

// Bytes a layer's forward keeps for backward, tensor by tensor (bf16 activations, fp32 norm stats).
// Its output stands in for its input (phase_memory_delta). The attention keeps its input, q, k, v (views
// of one [b, s/p, h + 2h_kv] buffer), the probabilities P [b, a, s/p, s] and its output; the ZeRO-3 MLP
// keeps its input, the W_in output and the activation output; each hidden dropout keeps a u8 mask;
// attention dropout keeps its u8 mask and the dropped probabilities P'. Selective recomputation keeps
// none of the s² terms.
double closed_form_saved_bytes(const ModelSpec& m, double b, double s, int p, Recompute recompute) {
  const auto h = static_cast<double>(m.hidden), h_kv = static_cast<double>(m.kv_hidden());
  const auto f = static_cast<double>(m.ffn_hidden), f_in = static_cast<double>(m.mlp_in_rows());
  const double stats = m.norm == NormKind::layer_norm ? 8 : 4;  // mean and rstd, or rms, fp32
  const bool keeps = recompute == Recompute::none;
  const double per_token = 2 * h                                   // layer output
                           + stats + 2 * h                         // norm1 statistics; attention input
                           + 2 * (h + 2 * h_kv)                    // q, k, v
                           + 2 * h                                 // attention output, before W_proj
                           + 2 * h                                 // h1, the first residual
                           + stats + 2 * h                         // norm2 statistics; MLP input
                           + 2 * f_in                              // W_in output
                           + 2 * f                                 // activation output
                           + (m.hidden_dropout > 0 ? 2 * h : 0);   // two dropout masks
  const double bytes_per_score = m.attention_dropout > 0 ? 5 : 2;  // P; its mask and P'
  const double probabilities = keeps ? bytes_per_score * static_cast<double>(m.heads) * b * (s / p) * s : 0;
  return per_token * b * s / p + probabilities;
}

double saved_bytes(const Program& program) {
  return phase_memory_delta(program, Phase::layer_forward, 0);
}

}  // namespace

TEST_CASE("ColossalZ: traced FLOPs match the closed form, full s² even when causal", "[strategies]") {
  for (bool causal : {false, true})
    for (int p : {1, 2, 4, 8})
      for (int64_t s : {4096, 16384})
        for (int64_t b : {1, 2}) {
          const ModelSpec model = small_model(causal);
          const Program program = trace_step(colossal_z(), model, p, s, b);
          INFO("causal " << causal << " p " << p << " s " << s << " b " << b);
          REQUIRE(layer_totals(program).flops ==
                  Approx(closed_form_layer_flops(model, static_cast<double>(b), static_cast<double>(s), p,
                                                 Recompute::none))
                      .epsilon(1e-9));
        }
  // The attention share is 4·b·s²·h/p forward, 8·b·s²·h/p backward, in score GEMMs only.
  const ModelSpec model = small_model(true);
  const Program program = trace_step(colossal_z(), model, 4, 8192);
  const Totals t = layer_totals(program);
  double score_flops = 0;
  for (const Op& op : program.ops)
    if (op.kind == OpKind::scores_gemm) score_flops += op.flops;
  REQUIRE(score_flops == Approx(12.0 * 8192 * 8192 * 1024 / 4).epsilon(1e-9));
  REQUIRE(t.count_by_kind.count(OpKind::attention_forward) == 0);  // no FlashAttention
  REQUIRE(t.count_by_kind.count(OpKind::attention_backward) == 0);
}

TEST_CASE("ColossalZ: traced volume is 8(p−1)/p·b·s·h + ZeRO-3's 3(p−1)/p·Φ_layer", "[strategies]") {
  // The usual estimate is ≈ 8(p−1)/p·bsh. Our count is exact for MHA: forward (p−1) K and (p−1) V
  // block sends of b·(s/p)·h each, backward the same again: 4(p−1)/p·bsh; plus the all-reduces of the
  // full-length dK and dV partial sums, 2(p−1)/p·bsh each as nccl-tests counts an all-reduce: 4(p−1)/p·bsh.
  // The estimate's "≈" leaves room for what varies around that core: a send_recv counts the bytes each
  // GPU sends, an all-reduce its bus bytes (NVLS or tree all-reduces move other amounts), GQA shrinks
  // every term to h_kv, and selective recomputation adds a K ring (see the test below).
  for (bool causal : {false, true})
    for (int p : {2, 4, 8})
      for (int64_t s : {2048, 16384})
        for (int64_t b : {1, 2}) {
          const ModelSpec model = small_model(causal);
          const Totals t = layer_totals(trace_step(colossal_z(), model, p, s, b));
          const double bsh = static_cast<double>(b * s * model.hidden);
          const double ring = 4.0 * (p - 1) / p * bsh;  // 4(p−1) blocks of b·(s/p)·h
          const double all_reduce = 2 * 2.0 * (p - 1) / p * bsh;
          const double phi = layer_matrix_elements(model);
          INFO("causal " << causal << " p " << p << " s " << s << " b " << b);
          REQUIRE(t.bus_bytes_by_kind.at(OpKind::send_recv) == Approx(2 * ring).epsilon(1e-12));
          REQUIRE(t.count_by_kind.at(OpKind::send_recv) == 4 * (p - 1));
          REQUIRE(t.bus_bytes_by_kind.at(OpKind::all_reduce) == Approx(2 * all_reduce).epsilon(1e-12));
          REQUIRE(t.count_by_kind.at(OpKind::all_reduce) == 2);
          REQUIRE(t.bus_bytes_by_kind.at(OpKind::send_recv) + t.bus_bytes_by_kind.at(OpKind::all_reduce) ==
                  Approx(2 * 8.0 * (p - 1) / p * bsh).epsilon(1e-12));
          // ZeRO-3: the four matrices gathered in forward and again in backward, their gradients
          // reduce-scattered: 3(p−1)/p·Φ_layer, independent of s.
          REQUIRE(t.bus_bytes_by_kind.at(OpKind::all_gather) ==
                  Approx(2 * 2.0 * (p - 1) / p * phi).epsilon(1e-12));
          REQUIRE(t.count_by_kind.at(OpKind::all_gather) == 8);
          REQUIRE(t.bus_bytes_by_kind.at(OpKind::reduce_scatter) ==
                  Approx(2 * (p - 1.0) / p * phi).epsilon(1e-12));
          REQUIRE(t.count_by_kind.at(OpKind::reduce_scatter) == 4);
          REQUIRE(t.bus_bytes ==
                  Approx(2 * (8.0 * (p - 1) / p * bsh + 3.0 * (p - 1) / p * phi)).epsilon(1e-12));
        }
}

TEST_CASE("ColossalZ: one rank communicates nothing", "[strategies]") {
  const ModelSpec model = small_model(false);
  const Totals t = layer_totals(trace_step(colossal_z(), model, 1, 4096));
  REQUIRE(t.bus_bytes == 0);
  REQUIRE(t.count_by_kind.count(OpKind::send_recv) == 0);
}

TEST_CASE("ColossalZ: K and V blocks go round the ring, every exchange is waited once", "[strategies]") {
  const ModelSpec model = small_model(true);
  for (int p : {2, 4, 8})
    for (int rank : {0, 1, p - 1}) {
      const Program program = trace_step(colossal_z(), model, p, 8192, 1, Recompute::selective, rank);
      std::map<OpId, int> waits;
      std::vector<OpId> communications;
      for (OpId id = 0; id < program.ops.size(); ++id) {
        const Op& op = program.ops[id];
        if (op.phase != Phase::layer_forward && op.phase != Phase::layer_backward) continue;
        if (op.kind == OpKind::wait) {
          REQUIRE(op.deps.size() == 1);
          ++waits[op.deps[0]];
        }
        if (!is_communication(op.kind)) continue;
        communications.push_back(id);
        if (op.kind != OpKind::send_recv) continue;
        INFO("p " << p << " rank " << rank);
        REQUIRE(op.send_to == (rank + 1) % p);
        REQUIRE(op.recv_from == (rank - 1 + p) % p);
      }
      REQUIRE(waits.size() == communications.size());
      for (OpId id : communications) REQUIRE(waits[id] == 1);
    }
}

TEST_CASE("ColossalZ: every rank issues the same work", "[strategies]") {
  const ModelSpec model = small_model(true);
  const Totals first = layer_totals(trace_step(colossal_z(), model, 4, 8192, 1, Recompute::none, 0));
  for (int rank : {1, 2, 3}) {
    const Totals other = layer_totals(trace_step(colossal_z(), model, 4, 8192, 1, Recompute::none, rank));
    REQUIRE(other.flops == first.flops);
    REQUIRE(other.bus_bytes == first.bus_bytes);
  }
}

TEST_CASE("ColossalZ: saved activations are Korthikanti's 34·sbh/p + 5·a·b·s²/p with both dropouts",
          "[strategies]") {
  // Korthikanti et al. 2022, Table 2: ≈ 34·sbh/p + 5·a·b·s²/p. With hidden and attention dropout our
  // per-tensor count is exactly that (plus the norms' fp32 statistics, 16·sb/p): the s² term is P (bf16),
  // the attention dropout's u8 mask and the dropped P' (bf16). Without attention dropout it is P alone,
  // 2·a·b·s²/p.
  for (int p : {2, 4, 8})
    for (int64_t s : {8192, 32768})
      for (int64_t b : {1, 2}) {
        ModelSpec with_dropout = small_model(true);
        with_dropout.hidden_dropout = 0.1;
        with_dropout.attention_dropout = 0.1;
        const ModelSpec without = small_model(false);
        const auto bd = static_cast<double>(b), sd = static_cast<double>(s);
        INFO("p " << p << " s " << s << " b " << b);
        const double kept = saved_bytes(trace_step(colossal_z(), with_dropout, p, s, b));
        REQUIRE(kept ==
                Approx(closed_form_saved_bytes(with_dropout, bd, sd, p, Recompute::none)).epsilon(1e-12));
        const double sbh_p = bd * sd * static_cast<double>(with_dropout.hidden) / p;
        const double as2b_p = static_cast<double>(with_dropout.heads) * bd * sd * sd / p;
        REQUIRE(kept == Approx(34 * sbh_p + 16 * bd * sd / p + 5 * as2b_p).epsilon(1e-12));
        const double kept_without = saved_bytes(trace_step(colossal_z(), without, p, s, b));
        REQUIRE(kept_without ==
                Approx(closed_form_saved_bytes(without, bd, sd, p, Recompute::none)).epsilon(1e-12));
        REQUIRE(kept_without == Approx(32 * sbh_p + 16 * bd * sd / p + 2 * as2b_p).epsilon(1e-12));
      }
}

TEST_CASE("ColossalZ: selective recomputation drops P, pays one more K ring", "[strategies]") {
  for (int p : {2, 4, 8})
    for (int64_t s : {4096, 16384}) {
      const ModelSpec model = small_model(true);
      const auto sd = static_cast<double>(s);
      const Program none = trace_step(colossal_z(), model, p, s);
      const Program selective = trace_step(colossal_z(), model, p, s, 1, Recompute::selective);
      INFO("p " << p << " s " << s);
      REQUIRE(saved_bytes(selective) ==
              Approx(closed_form_saved_bytes(model, 1, sd, p, Recompute::selective)).epsilon(1e-12));
      const double dropped = 2.0 * static_cast<double>(model.heads) * sd * sd / p;  // P
      REQUIRE(saved_bytes(none) - saved_bytes(selective) == Approx(dropped).epsilon(1e-12));
      REQUIRE(layer_totals(selective).flops ==
              Approx(closed_form_layer_flops(model, 1, sd, p, Recompute::selective)).epsilon(1e-9));
      // The probabilities are rebuilt from a third K ring: (p−1) more blocks of b·(s/p)·h.
      const Totals t = layer_totals(selective);
      REQUIRE(t.count_by_kind.at(OpKind::send_recv) == 5 * (p - 1));
      REQUIRE(t.bus_bytes_by_kind.at(OpKind::send_recv) -
                  layer_totals(none).bus_bytes_by_kind.at(OpKind::send_recv) ==
              Approx(2 * (p - 1.0) / p * sd * static_cast<double>(model.hidden)).epsilon(1e-12));
    }
}

TEST_CASE("ColossalZ: full recomputation keeps only the layer input", "[strategies]") {
  const ModelSpec model = small_model(true);
  const int p = 8;
  const int64_t s = 16384;
  const Program full = trace_step(colossal_z(), model, p, s, 1, Recompute::full);
  REQUIRE(saved_bytes(full) == Approx(2.0 * s * static_cast<double>(model.hidden) / p).epsilon(1e-12));
  // The layer's forward runs twice: its FLOPs once more, and its K and V rings once more.
  const double once = closed_form_layer_flops(model, 1, static_cast<double>(s), p, Recompute::none);
  const double forward = gemm_forward_flops(model, static_cast<double>(s) / p) +
                         4.0 * static_cast<double>(s) * s * static_cast<double>(model.hidden) / p;
  REQUIRE(layer_totals(full).flops == Approx(once + forward).epsilon(1e-9));
  REQUIRE(layer_totals(full).count_by_kind.at(OpKind::send_recv) == 6 * (p - 1));
}

TEST_CASE("ColossalZ: keeps more than MegatronTS at long sequences, where it runs out of memory first",
          "[strategies]") {
  const ModelSpec model = small_model(true);
  for (int p : {4, 8})
    for (int64_t s : {65536, 131072}) {
      const auto sd = static_cast<double>(s);
      const Program colossal = trace_step(colossal_z(), model, p, s);
      const Program megatron = trace_step(megatron_ts(), model, p, s);
      INFO("p " << p << " s " << s);
      REQUIRE(saved_bytes(colossal) > saved_bytes(megatron));
      // The gap is the s² term: both keep about 32·sbh/p besides, FlashAttention only an lse.
      const double probabilities = 2.0 * static_cast<double>(model.heads) * sd * sd / p;
      REQUIRE(saved_bytes(colossal) - saved_bytes(megatron) == Approx(probabilities).epsilon(0.01));
      REQUIRE(peak_live_bytes(colossal) > peak_live_bytes(megatron));
    }
}

TEST_CASE("ColossalZ: GQA and SwiGLU: compact K/V blocks on the wire, heads expanded locally",
          "[strategies]") {
  for (MlpKind mlp : {MlpKind::gelu, MlpKind::swiglu})
    for (int p : {2, 4})
      for (int64_t s : {4096, 16384}) {
        const ModelSpec model = small_model(true, 4, mlp);
        REQUIRE_FALSE(colossal_z().unsupported(model, p).has_value());
        const auto sd = static_cast<double>(s);
        const Program program = trace_step(colossal_z(), model, p, s);
        const Totals t = layer_totals(program);
        INFO("swiglu " << (mlp == MlpKind::swiglu) << " p " << p << " s " << s);
        // The ring carries a_kv heads and the all-reduced dK, dV are summed over each KV head's query
        // group first: 8(p−1)/p·b·s·h_kv in all.
        const double bsh_kv = sd * static_cast<double>(model.kv_hidden());
        REQUIRE(t.bus_bytes_by_kind.at(OpKind::send_recv) ==
                Approx(2 * 4.0 * (p - 1) / p * bsh_kv).epsilon(1e-12));
        REQUIRE(t.bus_bytes_by_kind.at(OpKind::all_reduce) ==
                Approx(2 * 4.0 * (p - 1) / p * bsh_kv).epsilon(1e-12));
        REQUIRE(t.bus_bytes_by_kind.at(OpKind::reduce_scatter) ==
                Approx(2 * (p - 1.0) / p * layer_matrix_elements(model)).epsilon(1e-12));
        // Score GEMMs run on all a query heads: the same s² FLOPs as MHA.
        REQUIRE(t.flops == Approx(closed_form_layer_flops(model, 1, sd, p, Recompute::none)).epsilon(1e-9));
        REQUIRE(saved_bytes(program) ==
                Approx(closed_form_saved_bytes(model, 1, sd, p, Recompute::none)).epsilon(1e-12));
      }
}

TEST_CASE("ColossalZ: constraints are the unified layout's", "[strategies]") {
  const ModelSpec mha = small_model(true);
  for (int p : {1, 2, 4, 8, 16}) REQUIRE_FALSE(colossal_z().unsupported(mha, p).has_value());
  const auto heads = colossal_z().unsupported(mha, 3);
  REQUIRE(heads.has_value());
  REQUIRE_THAT(*heads, Catch::Contains("must divide the 16 attention heads"));
  const auto kv_heads = colossal_z().unsupported(small_model(true, 4), 8);
  REQUIRE(kv_heads.has_value());
  REQUIRE_THAT(*kv_heads, Catch::Contains("must divide the 4 key/value heads"));
  REQUIRE(colossal_z().name() == "colossal_z");
}
