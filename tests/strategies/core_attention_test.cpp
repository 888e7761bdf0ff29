#include "strategies/core_attention.hpp"

#include <catch2/catch.hpp>

#include "strategies/library.hpp"
#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;
using namespace paradyse::testing;

namespace {

ModelSpec unfused_model(bool causal, double dropout) {
  ModelSpec m = small_model(causal);
  m.attention_kernel = AttentionKernel::unfused;
  m.hidden_dropout = dropout;
  m.attention_dropout = dropout;
  return m;
}

// The strategies whose attention core follows the model's kernel.
const std::vector<const Strategy*>& whole_row_strategies() {
  static const std::vector<const Strategy*> strategies{&megatron_ts(), &ulysses_z()};
  return strategies;
}

// The layer ops labelled "attention" (the core, and Ulysses' all-to-alls) of the given kernels.
Totals attention_ops(const Program& program, std::initializer_list<Kernel> kernels, double* memory_bytes) {
  Totals t;
  *memory_bytes = 0;
  for (const Op& op : program.ops) {
    if (op.phase != Phase::layer_forward && op.phase != Phase::layer_backward) continue;
    if (program.label(op) != "attention") continue;
    if (std::find(kernels.begin(), kernels.end(), op.kernel) == kernels.end()) continue;
    t.flops += op.flops;
    t.count_by_kind[op.kind] += 1;
    *memory_bytes += op.memory_bytes;
  }
  return t;
}

// The layer's ops by backend call.
std::map<Kernel, int> kernel_counts(const Program& program) {
  std::map<Kernel, int> counts;
  for (const Op& op : program.ops)
    if (op.phase == Phase::layer_forward || op.phase == Phase::layer_backward) ++counts[op.kernel];
  return counts;
}

}  // namespace

TEST_CASE("unfused attention: its GEMMs cover all s² pairs, causal or not, and its bytes are the s² blocks'",
          "[strategies]") {
  for (const Strategy* strategy : whole_row_strategies())
    for (bool causal : {false, true})
      for (int p : {1, 2, 8})
        for (int64_t s : {2048, 8192}) {
          const ModelSpec model = unfused_model(causal, 0.1);
          const int64_t b = 2;
          const Program program = trace_step(*strategy, model, p, s, b);
          INFO(strategy->name() << " causal " << causal << " p " << p << " s " << s);
          const double bd = as_double(b), sd = as_double(s), h = as_double(model.hidden);
          const double scores = bd * as_double(model.heads) * sd * sd / p;  // elements of S on this rank
          double gemm_bytes = 0;
          const Totals gemms = attention_ops(
              program, {Kernel::scores, Kernel::scores_times, Kernel::scores_transposed_times}, &gemm_bytes);
          // QKᵀ and P'·V forward, four GEMMs backward, each 2·b·s²·h/p FLOPs: the mask saves nothing.
          REQUIRE(gemms.count_by_kind.at(OpKind::scores_gemm) == 6);
          REQUIRE(gemms.flops == Approx(12 * bd * sd * sd * h / p).epsilon(1e-12));
          // Each GEMM reads or writes one s² block (2 bytes) and two [b, s, a/p, d] operands.
          REQUIRE(gemm_bytes == Approx(6 * (2 * scores + 2 * 2 * bd * sd * h / p)).epsilon(1e-12));
          // Softmax 2+2, dropout 2+1+2, its backward 2+1+2, softmax backward 2+2+2 bytes per score.
          double elementwise_bytes = 0;
          attention_ops(
              program, {Kernel::softmax, Kernel::softmax_backward, Kernel::dropout, Kernel::dropout_backward},
              &elementwise_bytes);
          REQUIRE(elementwise_bytes == Approx(20 * scores).epsilon(1e-12));
          REQUIRE(kernel_counts(program).count(Kernel::attention_forward) == 0);
        }
}

TEST_CASE("unfused attention: a layer keeps Korthikanti's s·b·h·(34 + 5·a·s/h)/t bytes", "[strategies]") {
  // Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (MLSys 2023),
  // Table 2 with tensor and sequence parallelism of degree t:
  // attention 11·sbh + 5·a·s²·b, MLP 19·sbh, norms 4·sbh, all over t. Beyond it only the two norms'
  // fp32 statistics, 16·s·b/t bytes.
  for (const Strategy* strategy : whole_row_strategies())
    for (int p : {1, 2, 4, 8})
      for (int64_t s : {2048, 8192}) {
        const ModelSpec model = unfused_model(true, 0.1);
        const int64_t b = 2;
        const double sbh = as_double(s * b * model.hidden);
        const double korthikanti = sbh * (34 + 5 * as_double(model.heads * s) / as_double(model.hidden)) / p;
        INFO(strategy->name() << " p " << p << " s " << s);
        REQUIRE(phase_memory_delta(trace_step(*strategy, model, p, s, b), Phase::layer_forward, 0) ==
                Approx(korthikanti).epsilon(0.01));
      }
}

TEST_CASE("selective recomputation recomputes exactly the attention core", "[strategies]") {
  for (const Strategy* strategy : whole_row_strategies())
    for (AttentionKernel kernel : {AttentionKernel::flash, AttentionKernel::unfused})
      for (bool causal : {false, true}) {
        ModelSpec model = unfused_model(causal, 0.1);
        model.attention_kernel = kernel;
        const int p = 4;
        const int64_t s = 4096, b = 1;
        INFO(strategy->name() << " " << to_string(kernel) << " causal " << causal);
        const Program none = trace_step(*strategy, model, p, s, b);
        const Program selective = trace_step(*strategy, model, p, s, b, Recompute::selective);
        // Every call of the plain step, plus the core's forward once more, and nothing else.
        std::map<Kernel, int> expected = kernel_counts(none);
        if (kernel == AttentionKernel::flash) {
          ++expected[Kernel::attention_forward];
        } else {
          ++expected[Kernel::scores];
          ++expected[Kernel::softmax];
          ++expected[Kernel::dropout];
        }
        REQUIRE(kernel_counts(selective) == expected);
        // What it no longer keeps: the s² blocks (P, the mask, P'), or the flash kernel's lse (and
        // Ulysses' head-layout output, which only the flash backward reads).
        const double sd = as_double(s), heads = as_double(model.heads);
        const double dropped =
            kernel == AttentionKernel::unfused
                ? 5 * heads * sd * sd / p
                : 4 * heads * sd / p + (strategy == &ulysses_z() ? 2 * sd * as_double(model.hidden) / p : 0);
        REQUIRE(phase_memory_delta(none, Phase::layer_forward, 0) -
                    phase_memory_delta(selective, Phase::layer_forward, 0) ==
                Approx(dropped).epsilon(1e-12));
      }
}

TEST_CASE("ring strategies run flash attention whatever the model's kernel", "[strategies]") {
  for (const Strategy* strategy : {&megatron_cz(), &metp()}) {
    const ModelSpec flash = small_model(true);
    ModelSpec unfused = flash;
    unfused.attention_kernel = AttentionKernel::unfused;
    INFO(strategy->name());
    REQUIRE(kernel_counts(trace_step(*strategy, unfused, 4, 4096)) ==
            kernel_counts(trace_step(*strategy, flash, 4, 4096)));
    REQUIRE(layer_totals(trace_step(*strategy, unfused, 4, 4096)).flops ==
            layer_totals(trace_step(*strategy, flash, 4, 4096)).flops);
  }
}
