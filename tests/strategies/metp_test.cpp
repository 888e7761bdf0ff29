#include "strategies/library.hpp"

#include <catch2/catch.hpp>

#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;
using namespace paradyse::testing;

namespace {

// Models every degree below divides (p | a, p | a_kv): MHA and GQA, GELU and SwiGLU, causal or not.
std::vector<ModelSpec> models_for(int p) {
  std::vector<ModelSpec> models{small_model(false), small_model(true), wide_gqa_model(true)};
  if (p <= 4) {  // a_kv = 4
    models.push_back(small_model(false, 4));
    models.push_back(small_model(true, 4, MlpKind::swiglu));
  }
  return models;
}

// The ops of layer 0's forward, of its recompute pass (the first ops of its backward phase, as many as
// the forward issued: layer.cpp re-runs the same forward) and of the backward proper.
struct LayerPasses {
  std::vector<const Op*> forward, recompute, backward;
};

std::pair<std::size_t, std::size_t> phase_ops(const Program& program, Phase phase, int layer) {
  for (std::size_t i = 0; i < program.phases.size(); ++i) {
    const PhaseMark& mark = program.phases[i];
    if (mark.phase != phase || mark.layer != layer) continue;
    const std::size_t end =
        i + 1 < program.phases.size() ? program.phases[i + 1].first_op : program.ops.size();
    return {mark.first_op, end};
  }
  FAIL("no phase " << to_string(phase) << " of layer " << layer);
  return {0, 0};
}

// The passes point into `program`, which must outlive them.
LayerPasses layer_passes(const Program&& program) = delete;
LayerPasses layer_passes(const Program& program) {
  LayerPasses passes;
  const auto [forward_begin, forward_end] = phase_ops(program, Phase::layer_forward, 0);
  const auto [backward_begin, backward_end] = phase_ops(program, Phase::layer_backward, 0);
  const std::size_t recompute_end = backward_begin + (forward_end - forward_begin);
  REQUIRE(recompute_end <= backward_end);
  for (std::size_t i = forward_begin; i < forward_end; ++i) passes.forward.push_back(&program.ops[i]);
  for (std::size_t i = backward_begin; i < recompute_end; ++i) passes.recompute.push_back(&program.ops[i]);
  for (std::size_t i = recompute_end; i < backward_end; ++i) passes.backward.push_back(&program.ops[i]);
  return passes;
}

struct Traffic {
  int broadcasts = 0, reduces = 0, send_recvs = 0, others = 0;  // others: any other collective
  double broadcast_bytes = 0, reduce_bytes = 0, send_recv_bytes = 0;
};

Traffic traffic(const std::vector<const Op*>& ops) {
  Traffic t;
  for (const Op* op : ops) {
    if (!is_communication(op->kind)) continue;
    switch (op->kind) {
      case OpKind::broadcast:
        ++t.broadcasts;
        t.broadcast_bytes += op->bus_bytes;
        break;
      case OpKind::reduce:
        ++t.reduces;
        t.reduce_bytes += op->bus_bytes;
        break;
      case OpKind::send_recv:
        ++t.send_recvs;
        t.send_recv_bytes += op->bus_bytes;
        break;
      default:
        ++t.others;
    }
  }
  return t;
}

// What one forward pass of a layer sends, per rank (metp.cpp's header; nccl-tests bus bytes: the size
// for broadcast, reduce and send_recv). bf16 = 2 bytes, fp32 = 4.
//   Broadcasts: one per head group i, rank i's stacked [W_qkv; W_proj] shard, (h + 2h_kv)/p + h/p rows
//     of h: p·2·(2h + 2h_kv)/p·h = 4·h·(h + h_kv) bytes, the whole attention weights once.
//   Ring steps: per head group p−1 exchanges of the K|V block [b, s/p, 2h_kv/p]: p(p−1)·2·b·(s/p)·2h_kv/p
//     = 4(p−1)/p·b·s·h_kv bytes; then p−1 exchanges of the stacked MLP shard [(f_in + f)/p, h]:
//     2(p−1)/p·(f_in + f)·h bytes.
// The p broadcasts and p(p−1) ring steps per layer are the attention's part; the MLP ring adds p−1
// steps.
Traffic expected_forward(const ModelSpec& m, int p, int64_t b, int64_t s) {
  const double h = as_double(m.hidden), h_kv = as_double(m.kv_hidden());
  const double f_in = as_double(m.mlp_in_rows()), f = as_double(m.ffn_hidden);
  Traffic t;
  t.broadcasts = p;
  t.broadcast_bytes = 4 * h * (h + h_kv);
  t.send_recvs = p * (p - 1) + (p - 1);
  t.send_recv_bytes = 4.0 * (p - 1) / p * as_double(b * s) * h_kv + 2.0 * (p - 1) / p * (f_in + f) * h;
  return t;
}

// The backward proper (after the recompute pass), per rank:
//   Broadcasts: the attention weights again, 4·h·(h + h_kv) bytes.
//   Reduces: each group's stacked [dW_qkv; dW_proj] onto its owner, p of (2h + 2h_kv)/p·h: 4·h·(h + h_kv).
//   Ring steps: per group p−1 K|V exchanges as forward (4(p−1)/p·b·s·h_kv bytes in all) and p−1 hops of
//     the fp32 dK|dV accumulator [b, s/p, 2h_kv/p]: p(p−1)·4·b·(s/p)·2h_kv/p = 8(p−1)/p·b·s·h_kv; the MLP
//     shards p−1 steps and their bf16 gradient partial sums p−1 hops: 2·2(p−1)/p·(f_in + f)·h.
Traffic expected_backward(const ModelSpec& m, int p, int64_t b, int64_t s) {
  const double h = as_double(m.hidden), h_kv = as_double(m.kv_hidden());
  const double f_in = as_double(m.mlp_in_rows()), f = as_double(m.ffn_hidden);
  Traffic t;
  t.broadcasts = p;
  t.broadcast_bytes = 4 * h * (h + h_kv);
  t.reduces = p;
  t.reduce_bytes = 4 * h * (h + h_kv);
  t.send_recvs = 2 * p * (p - 1) + 2 * (p - 1);
  t.send_recv_bytes =
      (4.0 + 8.0) * (p - 1) / p * as_double(b * s) * h_kv + 4.0 * (p - 1) / p * (f_in + f) * h;
  return t;
}

void require_traffic(const Traffic& traced, const Traffic& expected) {
  REQUIRE(traced.others == 0);
  REQUIRE(traced.broadcasts == expected.broadcasts);
  REQUIRE(traced.reduces == expected.reduces);
  REQUIRE(traced.send_recvs == expected.send_recvs);
  REQUIRE(traced.broadcast_bytes == Approx(expected.broadcast_bytes).epsilon(1e-12));
  REQUIRE(traced.reduce_bytes == Approx(expected.reduce_bytes).epsilon(1e-12));
  REQUIRE(traced.send_recv_bytes == Approx(expected.send_recv_bytes).epsilon(1e-12));
}

// FLOPs of one layer on one rank: forward, the recompute pass (the same forward again), backward.
// GEMMs (Korthikanti et al. 2022, App. A): every weight matrix once over the b·s/p local tokens, 2 FLOPs
// per multiply-add: G = 2·b·(s/p)·h·(h + 2h_kv + h + f_in + f) (24·b·s·h²/p for MHA and a 4h GELU MLP);
// backward a dgrad and a wgrad GEMM each, 2G. Attention: 4·b·h per computed pair forward (q·kᵀ and
// p·v summed over the p head groups), A = 4·b·h·pairs/p; FlashAttention's backward counts 2.5× its
// forward (tracing_backend.cpp's convention). In all 2(G + A) + 2G + 2.5A = 4G + 4.5A. Exact: causal
// halving comes from the exact pair count, not a factor ½.
double recomputing_layer_flops(const ModelSpec& m, double b, double s, int p) {
  const double h = as_double(m.hidden), h_kv = as_double(m.kv_hidden());
  const double gemm =
      2 * b * (s / p) * h * (2 * h + 2 * h_kv + as_double(m.mlp_in_rows()) + as_double(m.ffn_hidden));
  const double attention = 4 * b * h * attention_pairs(m.causal, s) / p;
  return 4 * gemm + 4.5 * attention;
}

// Highest live activation bytes while a layer runs (forward, recompute or backward): the transient peak
// the layers add on top of what the embedding left, not the head's logits chunks.
double layer_peak_live_bytes(const Program& program) {
  double live = 0, peak = 0;
  std::size_t mark = 0;
  bool in_layer = false;
  for (std::size_t e = 0; e < program.memory.size(); ++e) {
    while (mark < program.phases.size() && program.phases[mark].first_memory_event <= e) {
      in_layer = program.phases[mark].phase == Phase::layer_forward ||
                 program.phases[mark].phase == Phase::layer_backward;
      ++mark;
    }
    live += static_cast<double>(program.memory[e].bytes);
    if (in_layer) peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace

TEST_CASE("METP: name, constraints of the unified layout, always recomputes", "[strategies]") {
  const Strategy& strategy = metp();
  REQUIRE(strategy.name() == "metp");
  REQUIRE(strategy.always_recomputes());
  REQUIRE_FALSE(strategy.unsupported(small_model(true), 8).has_value());
  REQUIRE_FALSE(strategy.unsupported(small_model(true, 4), 4).has_value());
  const auto heads = strategy.unsupported(small_model(true), 3);
  REQUIRE(heads.has_value());
  REQUIRE_THAT(*heads, Catch::Contains("16 attention heads"));
  const auto kv_heads = strategy.unsupported(small_model(true, 4), 8);
  REQUIRE(kv_heads.has_value());
  REQUIRE_THAT(*kv_heads, Catch::Contains("4 key/value heads"));
}

TEST_CASE("METP: message counts and bus bytes per kind, forward, recompute pass and backward",
          "[strategies]") {
  for (int p : {2, 4, 8})
    for (const ModelSpec& model : models_for(p))
      for (int64_t s : {4096, 32768})
        for (int64_t b : {1, 2}) {
          INFO("p " << p << " causal " << model.causal << " h " << model.hidden << " a " << model.heads
                    << " a_kv " << model.kv_heads << " s " << s << " b " << b);
          const Program program = trace_step(metp(), model, p, s, b);
          const LayerPasses passes = layer_passes(program);
          require_traffic(traffic(passes.forward), expected_forward(model, p, b, s));
          require_traffic(traffic(passes.recompute), expected_forward(model, p, b, s));
          require_traffic(traffic(passes.backward), expected_backward(model, p, b, s));
        }
}

TEST_CASE("METP: per layer 3p broadcasts, p reduces, 4(p²−1) ring steps, 20(p−1)/p·b·s·h_kv activation bytes",
          "[strategies]") {
  // The whole layer (forward + recompute + backward), from layer_totals: attention weights move 3× by
  // broadcast and their gradients 1× by reduce, 16·h·(h + h_kv) bytes whatever s and p; MLP shards 3× and
  // their gradients 1× around the ring, 8(p−1)/p·(f_in + f)·h bytes; K|V 3× in bf16 and dK|dV 1× in fp32,
  // (4 + 4 + 4 + 8)(p−1)/p·b·s·h_kv bytes: the only term that grows with s.
  for (int p : {2, 4, 8})
    for (const ModelSpec& model : models_for(p))
      for (int64_t s : {8192, 65536}) {
        INFO("p " << p << " causal " << model.causal << " a_kv " << model.kv_heads << " s " << s);
        const Totals t = layer_totals(trace_step(metp(), model, p, s));
        const double h = as_double(model.hidden), h_kv = as_double(model.kv_hidden());
        const double mlp = as_double(model.mlp_in_rows() + model.ffn_hidden) * h;
        REQUIRE(t.count_by_kind.at(OpKind::broadcast) == 3 * p);
        REQUIRE(t.count_by_kind.at(OpKind::reduce) == p);
        REQUIRE(t.count_by_kind.at(OpKind::send_recv) == 4 * (p * p - 1));
        REQUIRE(t.count_by_kind.count(OpKind::all_gather) == 0);
        REQUIRE(t.count_by_kind.count(OpKind::reduce_scatter) == 0);
        REQUIRE(t.count_by_kind.count(OpKind::all_reduce) == 0);
        REQUIRE(t.count_by_kind.count(OpKind::all_to_all) == 0);
        REQUIRE(t.bus_bytes_by_kind.at(OpKind::broadcast) + t.bus_bytes_by_kind.at(OpKind::reduce) ==
                Approx(16 * h * (h + h_kv)).epsilon(1e-12));
        REQUIRE(t.bus_bytes_by_kind.at(OpKind::send_recv) ==
                Approx(20.0 * (p - 1) / p * as_double(s) * h_kv + 8.0 * (p - 1) / p * mlp).epsilon(1e-12));
      }
}

TEST_CASE("METP: the recompute pass repeats the forward op for op", "[strategies]") {
  for (bool causal : {false, true}) {
    const Program program = trace_step(metp(), small_model(causal, 4, MlpKind::swiglu), 4, 8192);
    const LayerPasses passes = layer_passes(program);
    REQUIRE(passes.recompute.size() == passes.forward.size());
    for (std::size_t i = 0; i < passes.forward.size(); ++i) {
      INFO("causal " << causal << " op " << i);
      REQUIRE(passes.recompute[i]->kind == passes.forward[i]->kind);
      REQUIRE(passes.recompute[i]->flops == passes.forward[i]->flops);
      REQUIRE(passes.recompute[i]->bus_bytes == passes.forward[i]->bus_bytes);
    }
  }
}

TEST_CASE("METP: broadcast and reduce roots walk the head groups, ring steps go to r+1 from r−1",
          "[strategies]") {
  const int p = 4;
  for (int rank = 0; rank < p; ++rank) {
    INFO("rank " << rank);
    const Program program = trace_step(metp(), small_model(true), p, 8192, 1, Recompute::none, rank);
    const LayerPasses passes = layer_passes(program);
    for (const std::vector<const Op*>* pass : {&passes.forward, &passes.recompute, &passes.backward}) {
      std::vector<int> broadcast_roots, reduce_roots;
      for (const Op* op : *pass) {
        if (op->kind == OpKind::broadcast) broadcast_roots.push_back(op->root);
        if (op->kind == OpKind::reduce) reduce_roots.push_back(op->root);
        if (op->kind == OpKind::send_recv) {
          REQUIRE(op->send_to == (rank + 1) % p);
          REQUIRE(op->recv_from == (rank - 1 + p) % p);
        }
      }
      REQUIRE(broadcast_roots == std::vector<int>{0, 1, 2, 3});
      if (pass == &passes.backward) REQUIRE(reduce_roots == std::vector<int>{0, 1, 2, 3});
    }
  }
}

TEST_CASE("METP: every communication is waited exactly once", "[strategies]") {
  const Program program = trace_step(metp(), small_model(true, 4, MlpKind::swiglu), 4, 8192, 2);
  std::vector<int> waits(program.ops.size(), 0);
  for (const Op& op : program.ops)
    if (op.kind == OpKind::wait)
      for (OpId dep : op.deps) ++waits[dep];
  int communications = 0;
  for (std::size_t i = 0; i < program.ops.size(); ++i) {
    if (!is_communication(program.ops[i].kind)) continue;
    ++communications;
    INFO("op " << i << " " << to_string(program.ops[i].kind));
    REQUIRE(waits[i] == 1);
  }
  REQUIRE(communications > 0);
}

TEST_CASE("METP: traced FLOPs are forward twice plus backward, in closed form", "[strategies]") {
  for (int p : {1, 2, 4, 8})
    for (const ModelSpec& model : models_for(p))
      for (int64_t s : {4096, 32768})
        for (int64_t b : {1, 2}) {
          INFO("p " << p << " causal " << model.causal << " h " << model.hidden << " a_kv " << model.kv_heads
                    << " s " << s << " b " << b);
          const Program program = trace_step(metp(), model, p, s, b);
          REQUIRE(layer_totals(program).flops ==
                  Approx(recomputing_layer_flops(model, as_double(b), as_double(s), p)).epsilon(1e-9));
        }
}

TEST_CASE("METP: FLOPs agree with Korthikanti's 96·b·s·h²/p + causal-halved attention with full recompute",
          "[strategies]") {
  // MHA and a 4h GELU MLP: forward 24·b·s·h² + 4·b·s²·h (about half of the attention when causal), run
  // twice (recompute), backward 48·b·s·h² + 2.5× the attention; 1% covers the diagonal of the causal mask.
  for (bool causal : {false, true})
    for (int p : {2, 8}) {
      const ModelSpec model = small_model(causal);
      const double s = 32768, h = as_double(model.hidden);
      const double attention = 4 * s * s * h * (causal ? 0.5 : 1.0);
      INFO("causal " << causal << " p " << p);
      REQUIRE(layer_totals(trace_step(metp(), model, p, 32768)).flops ==
              Approx((96 * s * h * h + 4.5 * attention) / p).epsilon(0.01));
    }
}

TEST_CASE("METP: zig-zag balances the work, no causal ring block is skipped", "[strategies]") {
  const int p = 4;
  const ModelSpec model = small_model(true);
  const Program first = trace_step(metp(), model, p, 16384, 1, Recompute::none, 0);
  const Program last = trace_step(metp(), model, p, 16384, 1, Recompute::none, p - 1);
  REQUIRE(layer_totals(first).flops == layer_totals(last).flops);
  // Rank r's chunks r and 2p−1−r meet every other rank's keys, so each group runs p blocks: p² blocks per
  // forward pass, two passes, and p² block backwards.
  const LayerPasses passes = layer_passes(first);
  int forward_blocks = 0, backward_blocks = 0;
  for (const Op* op : passes.forward) forward_blocks += op->kind == OpKind::attention_forward ? 1 : 0;
  for (const Op* op : passes.backward) backward_blocks += op->kind == OpKind::attention_backward ? 1 : 0;
  REQUIRE(forward_blocks == p * p);
  REQUIRE(backward_blocks == p * p);
}

TEST_CASE("METP: one rank communicates nothing", "[strategies]") {
  const Totals t = layer_totals(trace_step(metp(), small_model(true), 1, 4096));
  REQUIRE(t.bus_bytes == 0);
  for (OpKind kind : {OpKind::broadcast, OpKind::reduce, OpKind::send_recv, OpKind::all_gather})
    REQUIRE(t.count_by_kind.count(kind) == 0);
}

TEST_CASE("METP: only the layer input is saved, 2·b·s·h/p bytes per layer", "[strategies]") {
  // layer_forward's memory delta is the output [b, s/p, h] bf16 standing in for the input the layer keeps;
  // everything the forward made for backward (per group q, K|V, out, lse; the MLP chunks; norms, dropout
  // masks) is freed before the phase ends, whatever the recompute option.
  for (int p : {2, 4, 8})
    for (const ModelSpec& base : models_for(p))
      for (double dropout : {0.0, 0.1})
        for (int64_t b : {1, 2}) {
          ModelSpec model = base;
          model.hidden_dropout = dropout;
          const int64_t s = 16384;
          INFO("p " << p << " causal " << model.causal << " a_kv " << model.kv_heads << " dropout " << dropout
                    << " b " << b);
          REQUIRE(phase_memory_delta(trace_step(metp(), model, p, s, b), Phase::layer_forward, 0) ==
                  2.0 * as_double(b * s * model.hidden) / p);
        }
}

TEST_CASE("METP: the recompute option is ignored (always full)", "[strategies]") {
  const ModelSpec model = small_model(true, 4, MlpKind::swiglu);
  const Program none = trace_step(metp(), model, 4, 8192);
  for (Recompute recompute : {Recompute::selective, Recompute::full}) {
    INFO("recompute " << to_string(recompute));
    const Program other = trace_step(metp(), model, 4, 8192, 1, recompute);
    REQUIRE(other.ops.size() == none.ops.size());
    REQUIRE(other.memory.size() == none.memory.size());
    REQUIRE(layer_totals(other).flops == layer_totals(none).flops);
    REQUIRE(layer_totals(other).bus_bytes == layer_totals(none).bus_bytes);
    REQUIRE(peak_live_bytes(other) == peak_live_bytes(none));
  }
}

TEST_CASE("METP: leaner than MegatronTS at long sequences", "[strategies]") {
  // At s = 131072, p = 8 MegatronTS gathers [b, s, h] activations and keeps 34·s·b·h/p bytes per layer;
  // METP never leaves [b, s/p, h] and keeps 2·b·s·h/p. Compared on the peaks the layers reach (the head's
  // logits chunks are the same for both), over several layers so that the saved activations add up.
  for (bool causal : {false, true}) {
    const ModelSpec model = small_model(causal);
    const int p = 8, layers = 4;
    const int64_t s = 131072;
    const double metp_peak =
        layer_peak_live_bytes(trace_step(metp(), model, p, s, 1, Recompute::none, 0, layers));
    const double megatron_peak =
        layer_peak_live_bytes(trace_step(megatron_ts(), model, p, s, 1, Recompute::none, 0, layers));
    INFO("causal " << causal << " metp " << metp_peak << " megatron_ts " << megatron_peak);
    REQUIRE(metp_peak < 0.5 * megatron_peak);
    // One layer too: the transient of a recomputed METP layer stays below MegatronTS's.
    REQUIRE(layer_peak_live_bytes(trace_step(metp(), model, p, s)) <
            layer_peak_live_bytes(trace_step(megatron_ts(), model, p, s)));
  }
}
