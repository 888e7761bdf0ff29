// Tracing a training step in tests, and summing what its layers did.
#pragma once

#include <map>

#include "program/tracing_backend.hpp"
#include "strategies/training_step.hpp"

namespace paradyse::testing {

inline double as_double(int64_t x) {
  return static_cast<double>(x);
}

// A generic pre-LN block with MHA and a GELU MLP, small enough to trace in microseconds.
inline ModelSpec small_model(bool causal, int64_t kv_heads = 16, MlpKind mlp = MlpKind::gelu) {
  ModelSpec m;
  m.name = "test";
  m.hidden = 1024;
  m.heads = 16;
  m.kv_heads = kv_heads;
  m.ffn_hidden = mlp == MlpKind::gelu ? 4096 : 2816;
  m.num_layers = 2;
  m.vocab = 32000;
  m.causal = causal;
  m.mlp = mlp;
  m.norm = mlp == MlpKind::gelu ? NormKind::layer_norm : NormKind::rms_norm;
  return m;
}

// Another shape: h 2048, 32 query heads, 8 KV heads, SwiGLU.
inline ModelSpec wide_gqa_model(bool causal) {
  ModelSpec m = small_model(causal, 8, MlpKind::swiglu);
  m.hidden = 2048;
  m.heads = 32;
  m.ffn_hidden = 5632;
  return m;
}

// Φ_layer: elements of one layer's four weight matrices, what ZeRO-3 gathers and reduce-scatters (the
// norm weights are replicated): (h + 2h_kv)·h + h·h + f_in·h + f·h, f_in = f (GELU) or 2f (SwiGLU).
inline double layer_matrix_elements(const ModelSpec& m) {
  const double h = as_double(m.hidden), h_kv = as_double(m.kv_hidden());
  return (h + 2 * h_kv) * h + h * h + as_double(m.mlp_in_rows()) * h + as_double(m.ffn_hidden) * h;
}

// Forward GEMM FLOPs of one layer on `tokens` tokens with whole weight matrices, 2 per multiply-add:
// Korthikanti et al. 2022 (Appendix A)'s 24·tokens·h² for MHA with a 4h GELU MLP, generalised.
inline double gemm_forward_flops(const ModelSpec& m, double tokens) {
  return 2 * tokens * layer_matrix_elements(m);
}

// (query, key) pairs attention computes for one sequence and head: s(s+1)/2 when causal (diagonal
// included), s² otherwise.
inline double attention_pairs(bool causal, double s) {
  return causal ? s * (s + 1) / 2 : s * s;
}

// FLOPs of one layer on one rank, forward and backward, for a strategy that splits every GEMM and the
// attention pairs evenly over p ranks and computes attention FlashAttention-style: GEMMs forward G, backward
// a dgrad and a wgrad GEMM each (2G); attention 4·b·h per computed pair forward (q·kᵀ and p·v),
// FlashAttention's backward 2.5× its forward (tracing_backend.cpp's convention).
inline double flash_layer_flops(const ModelSpec& m, double b, double s, int p) {
  const double attention = 4 * b * as_double(m.hidden) * attention_pairs(m.causal, s);
  return (3 * gemm_forward_flops(m, b * s) + 3.5 * attention) / p;
}

// Traces one step (of `micro_batches` micro-batches) of `num_layers` layers of `strategy` on `rank` of
// `degree`.
inline Program trace_step(const Strategy& strategy, const ModelSpec& model, int degree, int64_t tokens,
                          int64_t batch = 1, Recompute recompute = Recompute::none, int rank = 0,
                          int num_layers = 1, int64_t micro_batches = 1) {
  StepSpec spec;
  spec.model = &model;
  spec.tokens = tokens;
  spec.batch = batch;
  spec.micro_batches = micro_batches;
  spec.plan = uniform_plan(strategy, num_layers, recompute);
  return trace_training_step(spec, rank, degree);
}

// What the ops of some phases add up to.
struct Totals {
  double flops = 0;
  double bus_bytes = 0;  // all communication, nccl-tests bus bytes
  std::map<OpKind, double> bus_bytes_by_kind;
  std::map<OpKind, int> count_by_kind;
};

inline Totals totals(const Program& program, std::initializer_list<Phase> phases) {
  Totals t;
  for (const Op& op : program.ops) {
    bool wanted = false;
    for (Phase p : phases) wanted = wanted || op.phase == p;
    if (!wanted) continue;
    t.flops += op.flops;
    t.bus_bytes += op.bus_bytes;
    t.bus_bytes_by_kind[op.kind] += op.bus_bytes;
    t.count_by_kind[op.kind] += 1;
  }
  return t;
}

inline Totals layer_totals(const Program& program) {
  return totals(program, {Phase::layer_forward, Phase::layer_backward});
}

// Bytes allocated and not freed during a phase (of a given layer): for a layer's forward, the
// activations it keeps for backward (its output standing in for its input, which the previous phase made).
inline double phase_memory_delta(const Program& program, Phase phase, int layer) {
  for (std::size_t i = 0; i < program.phases.size(); ++i) {
    const PhaseMark& mark = program.phases[i];
    if (mark.phase != phase || mark.layer != layer) continue;
    const std::size_t end =
        i + 1 < program.phases.size() ? program.phases[i + 1].first_memory_event : program.memory.size();
    double delta = 0;
    for (std::size_t e = mark.first_memory_event; e < end; ++e)
      delta += static_cast<double>(program.memory[e].bytes);
    return delta;
  }
  return 0;
}

// Highest live bytes of the whole program's activation timeline.
inline double peak_live_bytes(const Program& program) {
  double live = 0, peak = 0;
  for (const MemoryEvent& e : program.memory) {
    live += static_cast<double>(e.bytes);
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace paradyse::testing
