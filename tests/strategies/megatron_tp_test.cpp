#include <catch2/catch.hpp>

#include "strategies/library.hpp"
#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;
using namespace paradyse::testing;

namespace {

int count_in_phase(const Program& program, Phase phase, int layer, OpKind kind) {
  int count = 0;
  for (const Op& op : program.ops) count += op.phase == phase && op.layer == layer && op.kind == kind;
  return count;
}

}  // namespace

TEST_CASE("MegatronTP: traced FLOPs match the closed form, the same as MegatronTS's", "[strategies]") {
  for (bool causal : {false, true})
    for (int p : {2, 4, 8})
      for (int64_t s : {4096, 32768}) {
        const ModelSpec model = small_model(causal);
        INFO("causal " << causal << " p " << p << " s " << s);
        REQUIRE(layer_totals(trace_step(megatron_tp(), model, p, s)).flops ==
                Approx(flash_layer_flops(model, 1, static_cast<double>(s), p)).epsilon(0.01));
      }
}

TEST_CASE("MegatronTP: traced volume is 10(p−1)/p·b·s·h per layer: two all-reduces and a gather each way",
          "[strategies]") {
  // Megatron's four all-reduces of b·s·h (2(p−1)/p each), and the layer's gathers of its input
  // forward and of its output gradient backward ((p−1)/p each): the unified layout's price, since
  // Megatron-LM keeps the whole output on every rank between layers.
  for (int p : {2, 4, 8})
    for (int64_t s : {2048, 16384})
      for (int64_t b : {1, 2}) {
        const ModelSpec model = small_model(true);
        const Totals t = layer_totals(trace_step(megatron_tp(), model, p, s, b));
        const double elements = 10.0 * (p - 1) / p * static_cast<double>(b * s * model.hidden);
        INFO("p " << p << " s " << s << " b " << b);
        REQUIRE(t.bus_bytes == Approx(2 * elements).epsilon(1e-9));  // bf16
        REQUIRE(t.count_by_kind.at(OpKind::all_reduce) == 4);
        REQUIRE(t.count_by_kind.at(OpKind::all_gather) == 2);
        REQUIRE(t.count_by_kind.count(OpKind::reduce_scatter) == 0);
      }
}

TEST_CASE("MegatronTP: saved activations are Korthikanti's s·b·h·(10 + 24/t + 5·a·s/(h·t)) per layer",
          "[strategies]") {
  // Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (MLSys 2023),
  // Table 2, tensor parallelism without sequence
  // parallelism: the two norms' inputs, the two sublayers' inputs and the two dropout masks are kept
  // whole on every rank (10·sbh); the rest is split over t (24·sbh/t), and the unfused kernel's
  // scores 5·a·s²·b/t. Beyond that table: the norms' fp32 statistics on every token (2 × 8·s·b), and
  // with FlashAttention its log-sum-exp (4·a·s·b/t) instead of the scores.
  for (int p : {1, 2, 4, 8})
    for (int64_t s : {2048, 8192}) {
      ModelSpec model = small_model(true);
      model.hidden_dropout = model.attention_dropout = 0.1;
      const int64_t b = 2;
      const double sbh = as_double(s * b * model.hidden), sb = as_double(s * b);
      const double stats = 16 * sb;
      INFO("p " << p << " s " << s);
      REQUIRE(phase_memory_delta(trace_step(megatron_tp(), model, p, s, b), Phase::layer_forward, 0) ==
              Approx(sbh * (10 + 24.0 / p) + stats + 4 * as_double(model.heads) * sb / p).epsilon(0.01));
      model.attention_kernel = AttentionKernel::unfused;
      const double scores = 5 * as_double(model.heads) * as_double(s) / as_double(model.hidden) / p;
      REQUIRE(phase_memory_delta(trace_step(megatron_tp(), model, p, s, b), Phase::layer_forward, 0) ==
              Approx(sbh * (10 + 24.0 / p + scores) + stats).epsilon(0.01));
    }
}

TEST_CASE("MegatronTP: keeps more than MegatronTS, and recomputation keeps less", "[strategies]") {
  const ModelSpec model = small_model(true);
  const int p = 8;
  const int64_t s = 16384;
  auto saved = [&](const Strategy& strategy, Recompute recompute) {
    return phase_memory_delta(trace_step(strategy, model, p, s, 1, recompute), Phase::layer_forward, 0);
  };
  CHECK(saved(megatron_tp(), Recompute::none) > 2 * saved(megatron_ts(), Recompute::none));
  CHECK(saved(megatron_tp(), Recompute::selective) < saved(megatron_tp(), Recompute::none));
  // Full recomputation keeps only the layer's [b, s/p, h] input, as in any strategy.
  CHECK(saved(megatron_tp(), Recompute::full) ==
        Approx(2.0 * static_cast<double>(s * model.hidden) / p).epsilon(1e-9));
}

TEST_CASE("MegatronTP: norm gradients, summed over every token on every rank, are not all-reduced",
          "[strategies]") {
  const ModelSpec model = small_model(true);  // LayerNorm: gamma and beta of two norms
  const Program tp = trace_step(megatron_tp(), model, 4, 4096);
  const Program ts = trace_step(megatron_ts(), model, 4, 4096);
  CHECK(count_in_phase(tp, Phase::optimizer, 0, OpKind::all_reduce) == 0);
  CHECK(count_in_phase(ts, Phase::optimizer, 0, OpKind::all_reduce) == 4);
}
