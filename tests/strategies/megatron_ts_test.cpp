#include "strategies/library.hpp"

#include <catch2/catch.hpp>

#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;
using namespace paradyse::testing;

TEST_CASE("MegatronTS: traced FLOPs match the closed form", "[strategies]") {
  for (bool causal : {false, true})
    for (int p : {2, 4, 8})
      for (int64_t s : {4096, 32768}) {
        const ModelSpec model = small_model(causal);
        const Program program = trace_step(megatron_ts(), model, p, s);
        INFO("causal " << causal << " p " << p << " s " << s);
        REQUIRE(layer_totals(program).flops ==
                Approx(flash_layer_flops(model, 1, static_cast<double>(s), p)).epsilon(0.01));
      }
}

TEST_CASE("MegatronTS: traced volume is 10(p−1)/p·b·s·h per layer", "[strategies]") {
  for (int p : {2, 4, 8})
    for (int64_t s : {2048, 16384})
      for (int64_t b : {1, 2}) {
        const ModelSpec model = small_model(true);
        const Totals t = layer_totals(trace_step(megatron_ts(), model, p, s, b));
        const double elements = 10.0 * (p - 1) / p * static_cast<double>(b * s * model.hidden);
        INFO("p " << p << " s " << s << " b " << b);
        REQUIRE(t.bus_bytes == Approx(2 * elements).epsilon(1e-9));  // bf16
        REQUIRE(t.count_by_kind.at(OpKind::all_gather) == 6);
        REQUIRE(t.count_by_kind.at(OpKind::reduce_scatter) == 4);
      }
}

TEST_CASE("MegatronTS: saved activations are Korthikanti's 34·s·b·h/t per layer", "[strategies]") {
  // Table 2 of Korthikanti et al. 2022 with sequence parallelism and FlashAttention (no s² terms):
  // attention 11·sbh (incl. its dropout mask), MLP 19·sbh (incl. its dropout mask), norms 4·sbh, all
  // divided by t. Beyond that table we keep FlashAttention's log-sum-exp (4·a·s·b/t bytes) and the two
  // norms' fp32 statistics (2 × 8·s·b/t bytes).
  for (int p : {2, 4, 8})
    for (int64_t s : {8192, 65536}) {
      ModelSpec with_dropout = small_model(true);
      with_dropout.hidden_dropout = 0.1;
      ModelSpec without = small_model(true);
      const double sbh_t = static_cast<double>(s * with_dropout.hidden) / p;
      const double extras =
          (4.0 * static_cast<double>(with_dropout.heads) + 16.0) * static_cast<double>(s) / p;
      INFO("p " << p << " s " << s);
      REQUIRE(phase_memory_delta(trace_step(megatron_ts(), with_dropout, p, s), Phase::layer_forward, 0) ==
              Approx(34 * sbh_t + extras).epsilon(0.01));
      // Without dropout the two masks (1 byte per element each) are gone: 32·sbh/t.
      REQUIRE(phase_memory_delta(trace_step(megatron_ts(), without, p, s), Phase::layer_forward, 0) ==
              Approx(32 * sbh_t + extras).epsilon(0.01));
    }
}

TEST_CASE("MegatronTS: recomputation keeps less", "[strategies]") {
  const ModelSpec model = small_model(true);
  const int p = 8;
  const int64_t s = 16384;
  const double none = phase_memory_delta(trace_step(megatron_ts(), model, p, s), Phase::layer_forward, 0);
  const double selective = phase_memory_delta(trace_step(megatron_ts(), model, p, s, 1, Recompute::selective),
                                              Phase::layer_forward, 0);
  const double full =
      phase_memory_delta(trace_step(megatron_ts(), model, p, s, 1, Recompute::full), Phase::layer_forward, 0);
  const double sbh_t = static_cast<double>(s * model.hidden) / p;
  // selective recomputes the flash core, whose only tensor beyond the output W_proj keeps is its lse
  // [b, a/p, s] fp32; full keeps only the layer input (2·sbh/t: the output).
  REQUIRE(none - selective == Approx(4.0 * static_cast<double>(model.heads * s) / p).epsilon(1e-9));
  REQUIRE(full == Approx(2 * sbh_t).epsilon(1e-9));
  REQUIRE(layer_totals(trace_step(megatron_ts(), model, p, s, 1, Recompute::selective))
              .count_by_kind.at(OpKind::attention_forward) == 2);
  // Full recomputation runs the layer's forward twice.
  const double flops_none = layer_totals(trace_step(megatron_ts(), model, p, s)).flops;
  const double flops_full = layer_totals(trace_step(megatron_ts(), model, p, s, 1, Recompute::full)).flops;
  REQUIRE(flops_full > flops_none * 1.25);
}
