#include "steps/estimate.hpp"

#include <catch2/catch.hpp>

#include "strategies/library.hpp"
#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;
using namespace paradyse::testing;

namespace {

ModelSpec four_layers(bool causal) {
  ModelSpec m = small_model(causal);
  m.num_layers = 4;
  return m;
}

double static_bytes(const steps::Estimate& e) {
  return e.memory.weights_bytes + e.memory.gradients_bytes + e.memory.optimizer_states_bytes;
}

}  // namespace

TEST_CASE("Estimator: one traced layer per strategy prices the whole traced iteration", "[costmodel]") {
  // The estimate folds phases of a one-layer trace; an independent check traces every layer of the
  // model and reads the peak straight off the whole program's allocation timeline.
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  for (const Strategy* strategy : all_strategies())
    for (bool causal : {false, true})
      for (int64_t micro_batches : {1, 3}) {
        const ModelSpec model = four_layers(causal);
        if (strategy->unsupported(model, 8)) continue;
        steps::Estimator estimator(model, cluster);
        const int64_t s = 16384;
        const steps::Estimate e =
            estimator.estimate(*strategy, {.tokens = s, .degree = 8, .micro_batches = micro_batches});
        Program whole = trace_step(*strategy, model, 8, s, 1, Recompute::none, 0, 4, micro_batches);
        INFO(strategy->name() << " causal " << causal << " micro-batches " << micro_batches);
        REQUIRE(e.memory.peak_bytes - static_bytes(e) - e.memory.fragmentation_bytes ==
                Approx(peak_live_bytes(whole)).epsilon(1e-12));

        // Time: the phases are priced with no overlap across their boundaries, each past the first as
        // the steady state of a stack of like phases behind an asynchronous host (the longer of its
        // device time and its host's issue time). Scheduling the whole program at once may hide a
        // little more communication, and lets the host issue a host-bound phase during the device-bound
        // ones before it: never less. metp on this small model, whose ring steps are launch-bound, is
        // 7 % apart.
        whole.phases.resize(1);
        const costmodel::OpTimer timer(cluster, 8);
        const double unbroken = costmodel::cost_phases(whole, timer).front().cost.seconds;
        REQUIRE(unbroken <= e.time.total_s * (1 + 1e-12));
        REQUIRE(unbroken >= e.time.total_s * (strategy == &metp() ? 0.92 : 0.95));
        REQUIRE(e.flops == Approx(8 * layer_totals(whole).flops +
                                  8 * totals(whole, {Phase::embedding_forward, Phase::head,
                                                     Phase::embedding_backward, Phase::optimizer})
                                          .flops)
                               .epsilon(1e-9));
      }
}

TEST_CASE("Estimator: n micro-batches take n × (forward + backward) + one optimizer step", "[costmodel]") {
  const ModelSpec model = four_layers(true);
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  steps::Estimator estimator(model, cluster);
  for (const Strategy* strategy : strategies_for(model, 8)) {
    const steps::Estimate one = estimator.estimate(*strategy, {.tokens = 8192});
    for (int64_t n : {2, 5}) {
      INFO(strategy->name() << " n " << n);
      const steps::Estimate e = estimator.estimate(*strategy, {.tokens = 8192, .micro_batches = n});
      const auto nd = static_cast<double>(n);
      CHECK(e.time.total_s == Approx(nd * (one.time.forward_s + one.time.backward_s) + one.time.optimizer_s));
      CHECK(e.time.optimizer_s == one.time.optimizer_s);
      // One micro-batch's peak, plus the others' tokens and targets (int64 [1, s/p] each, s/p = 1024).
      const double inputs = (nd - 1) * 2 * 1024 * 8;
      CHECK(
          e.memory.peak_bytes ==
          Approx(one.memory.peak_bytes + inputs * (1 + cluster.gpu.allocator_fragmentation)).epsilon(1e-12));
      CHECK(e.model_flops == Approx(nd * one.model_flops));
      CHECK(e.mfu > one.mfu);  // the optimizer step is shared by more tokens
    }
  }
  REQUIRE_THROWS_WITH(estimator.estimate(megatron_ts(), {.tokens = 4096, .micro_batches = 0}),
                      Catch::Contains("between 1 and 1024 micro-batches"));
}

TEST_CASE("Estimator: static memory is Megatron-LM's 18 bytes per parameter, sharded 1/p", "[costmodel]") {
  // Megatron Core's developer guide (Distributed Optimizer): "bf16 parameters, fp32 gradients", 18
  // bytes per parameter without the distributed optimizer: bf16 weight 2, fp32 main gradient 4, fp32
  // master weight and two Adam moments 12.
  const ModelSpec model = load_model("llama3-8b");
  steps::Estimator estimator(model, hw::load_cluster("dgx-a100"));
  const steps::Estimate e = estimator.estimate(megatron_ts(), {.tokens = 8192});
  // Norm weights are replicated and the vocabulary is padded to a multiple of p: both below 0.1 %.
  REQUIRE(static_bytes(e) == Approx(18.0 * static_cast<double>(model.total_parameters()) / 8).epsilon(1e-3));
  REQUIRE(e.memory.gradients_bytes == Approx(2 * e.memory.weights_bytes));
  REQUIRE(e.memory.optimizer_states_bytes == Approx(6 * e.memory.weights_bytes));
}

TEST_CASE("model_flops: Korthikanti et al. 2022, Appendix A", "[costmodel]") {
  // 72·B·L·s·h²·(1 + s/(6h) + V/(12hL)) for a GELU MHA model with non-causal attention.
  ModelSpec m = four_layers(false);
  const double b = 2, s = 32768, h = static_cast<double>(m.hidden), L = 4, V = static_cast<double>(m.vocab);
  REQUIRE(steps::model_flops(m, 32768, 2) ==
          Approx(72 * b * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L))).epsilon(1e-12));
  // Causal attention does half the attention FLOPs.
  m.causal = true;
  REQUIRE(steps::model_flops(m, 32768, 2) ==
          Approx(72 * b * L * s * h * h * (1 + s / (12 * h) + V / (12 * h * L))).epsilon(1e-12));
}

TEST_CASE("Estimator: a mixed plan costs its layers' shares of the pure plans", "[costmodel]") {
  const ModelSpec model = four_layers(true);
  steps::Estimator estimator(model, hw::load_cluster("dgx-a100"));
  const std::vector<const Strategy*>& strategies = all_strategies();
  for (const Strategy* a : strategies)
    for (const Strategy* b : strategies) {
      if (a == b || a->unsupported(model, 8) || b->unsupported(model, 8)) continue;
      const steps::EstimateRequest request{.tokens = 32768};
      const double ta = estimator.estimate(*a, request).time.total_s;
      const double tb = estimator.estimate(*b, request).time.total_s;
      const LayerChoice la{a}, lb{b};
      const steps::Estimate mixed = estimator.estimate(Plan{la, lb, la, lb}, request);
      INFO(a->name() << " + " << b->name());
      REQUIRE(mixed.time.total_s == Approx((ta + tb) / 2).epsilon(1e-9));
      REQUIRE(mixed.plan == std::string(a->name()) + "," + std::string(b->name()) + "," +
                                std::string(a->name()) + "," + std::string(b->name()));
    }
}

TEST_CASE("Estimator: bad requests are input errors", "[costmodel]") {
  steps::Estimator estimator(four_layers(true), hw::load_cluster("dgx-a100"));
  REQUIRE_THROWS_WITH(estimator.estimate(megatron_ts(), {.tokens = 0}),
                      Catch::Contains("positive sequence length"));
  REQUIRE_THROWS_WITH(estimator.estimate(megatron_ts(), {.tokens = 4096, .degree = 16}),
                      Catch::Contains("between 1 and the 8 GPUs"));
  REQUIRE_THROWS_WITH(estimator.estimate(megatron_ts(), {.tokens = 4096, .degree = 3}),
                      Catch::Contains("must divide the 16 attention heads"));
  REQUIRE_THROWS_WITH(estimator.estimate(megatron_ts(), {.tokens = 4096, .batch = -1}),
                      Catch::Contains("positive batch"));
  REQUIRE_THROWS_WITH(estimator.estimate(Plan{{&megatron_ts()}}, {.tokens = 4096}),
                      Catch::Contains("one strategy per layer"));
  REQUIRE_THROWS_WITH(estimator.estimate(megatron_ts(), {.tokens = (int64_t{1} << 30) + 16}),
                      Catch::Contains("at most 2^30 = 1073741824 tokens"));
  REQUIRE_THROWS_WITH(estimator.estimate(megatron_ts(), {.tokens = int64_t{1} << 20, .batch = 1025}),
                      Catch::Contains("in a micro-batch (batch × seq)"));
}

TEST_CASE("Estimator: at 2^30 tokens a strategy whose tensor no int64 counts is out of the table",
          "[costmodel]") {
  // colossal_z materialises [b, a, s/p, s] scores: 16 heads × 2^60 pairs at degree 1 is 2^64 elements.
  const int64_t tokens = int64_t{1} << 30;
  steps::Estimator estimator(four_layers(true), hw::load_cluster("dgx-a100"));
  REQUIRE_THROWS_AS(estimator.estimate(colossal_z(), {.tokens = tokens, .degree = 1}), TensorTooLarge);
  const steps::CostTable table = estimator.cost_table(
      {{&megatron_ts(), Recompute::none}, {&colossal_z(), Recompute::none}}, {.tokens = tokens, .degree = 1});
  REQUIRE(table.candidates.size() == 1);
  CHECK(table.candidates[0].strategy == &megatron_ts());
  CHECK_FALSE(table.fits(steps::CostTable::Choice(4, 0)));  // priced, and out of memory
}

TEST_CASE("Estimator: lengths are padded to the layout's multiple, and padding is not model FLOPs",
          "[costmodel]") {
  steps::Estimator estimator(four_layers(true), hw::load_cluster("dgx-a100"));
  const steps::Estimate e = estimator.estimate(megatron_ts(), {.tokens = 4097});
  REQUIRE(e.padded_tokens == 4112);  // next multiple of 2p = 16
  REQUIRE(e.tokens == 4097);
  REQUIRE(e.model_flops == Approx(steps::model_flops(estimator.model(), 4097, 1)));
  const steps::Estimate again = estimator.estimate(megatron_ts(), {.tokens = 4097});
  REQUIRE(again.time.total_s == e.time.total_s);
}

TEST_CASE("Estimator: recomputation is chosen per layer", "[costmodel]") {
  const ModelSpec model = four_layers(true);
  steps::Estimator estimator(model, hw::load_cluster("dgx-a100"));
  const steps::EstimateRequest request{.tokens = 65536};
  const steps::Estimate none = estimator.estimate(megatron_ts(), request);
  const steps::Estimate full = estimator.estimate(megatron_ts(), request, Recompute::full);
  const LayerChoice keep{&megatron_ts(), Recompute::none}, redo{&megatron_ts(), Recompute::full};
  const steps::Estimate half = estimator.estimate(Plan{keep, redo, keep, redo}, request);
  // Every layer's saved activations are its own: half the layers keep everything, half only their input.
  REQUIRE(
      half.memory.saved_activations_bytes ==
      Approx((none.memory.saved_activations_bytes + full.memory.saved_activations_bytes) / 2).epsilon(1e-9));
  REQUIRE(half.time.total_s == Approx((none.time.total_s + full.time.total_s) / 2).epsilon(1e-9));
  REQUIRE(full.time.total_s > none.time.total_s);
  REQUIRE(full.memory.peak_bytes < none.memory.peak_bytes);
  REQUIRE(half.plan == "megatron_ts,megatron_ts:full,megatron_ts,megatron_ts:full");
}

TEST_CASE("Estimator: a packed micro-batch pads each document and counts attention within each",
          "[costmodel]") {
  const ModelSpec model = four_layers(true);
  steps::Estimator estimator(model, hw::load_cluster("dgx-a100"));
  const std::vector<int64_t> documents{1000, 3001, 97};
  const steps::Estimate packed = estimator.estimate(megatron_ts(), {.documents = documents});
  CHECK(packed.tokens == 4098);
  CHECK(packed.documents == 3);
  CHECK(packed.padded_tokens == 1008 + 3008 + 112);  // each to a multiple of 2p = 16
  // Model FLOPs: Korthikanti's per-layer attention term 4·s²·h/2 (causal) per document instead of S².
  const double h = static_cast<double>(model.hidden), L = 4;
  double squares = 0;
  for (const int64_t s : documents) squares += static_cast<double>(s * s);
  const double s_all = 4098;
  const double gemms_and_logits = steps::model_flops(model, 4098, 1) - 3 * L * 4 * s_all * s_all * h / 2;
  CHECK(packed.model_flops == Approx(gemms_and_logits + 3 * L * 4 * squares * h / 2).epsilon(1e-12));
  // The same tokens in one sequence attend over all S² / 2 pairs: slower, and the order of documents
  // changes nothing.
  const steps::Estimate one = estimator.estimate(megatron_ts(), {.tokens = 4098});
  CHECK(one.time.total_s > packed.time.total_s);
  CHECK(estimator.estimate(megatron_ts(), {.documents = {97, 3001, 1000}}).time.total_s ==
        packed.time.total_s);
  // One document is one sequence.
  CHECK(estimator.estimate(megatron_ts(), {.documents = {4098}}).time.total_s == one.time.total_s);
  REQUIRE_THROWS_WITH(estimator.estimate(megatron_ts(), {.documents = {512, 0, 8}}),
                      Catch::Contains("docs") && Catch::Contains("got 0 for document 2"));
}
