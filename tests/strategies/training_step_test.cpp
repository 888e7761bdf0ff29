// What a training step's program is made of, whatever the strategy: its size depends on the layers and
// the degree, not on the length.
#include "strategies/training_step.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "strategies/library.hpp"
#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;
using namespace paradyse::testing;

TEST_CASE("training step: the fused head's chunks stop multiplying, so the program stops growing",
          "[strategies]") {
  const ModelSpec model = small_model(true);
  StepSpec defaults;
  const int p = 2;
  // Up to max_loss_chunks chunks of loss_chunk_tokens local tokens, the chunks multiply with the length;
  // past that they grow instead.
  const int64_t cap_tokens = p * defaults.loss_chunk_tokens * defaults.max_loss_chunks;
  for (const Strategy* strategy : {&megatron_ts(), &ulysses_z(), &megatron_cz()}) {
    INFO(strategy->name());
    const std::size_t below = trace_step(*strategy, model, p, cap_tokens / 4).ops.size();
    const std::size_t at = trace_step(*strategy, model, p, cap_tokens).ops.size();
    CHECK(below < at);
    CHECK(trace_step(*strategy, model, p, cap_tokens * 4).ops.size() == at);
    CHECK(trace_step(*strategy, model, p, int64_t{1} << 30).ops.size() == at);
  }
}

TEST_CASE("training step: the unfused loss reads every logit in fp32 in ten passes, cast there and back",
          "[strategies]") {
  ModelSpec model = small_model(true);  // V 32,000
  model.loss_kernel = LossKernel::unfused;
  const int p = 4;
  // Fewer tokens than rows: each rank scores every token on its rows (three loss calls); more: each
  // scores its tokens on the gathered table (one). Either way one chunk, whatever the length.
  for (const auto& [tokens, loss_calls] : std::vector<std::pair<int64_t, int>>{{4096, 3}, {65536, 1}}) {
    INFO(tokens << " tokens");
    const double logits = static_cast<double>(tokens) * static_cast<double>(padded_vocab(model, p)) / p;
    double loss_bytes = 0, cast_bytes = 0;
    int calls = 0;
    for (const Op& op : trace_step(megatron_ts(), model, p, tokens).ops) {
      if (op.phase != Phase::head) continue;
      if (op.kernel == Kernel::cross_entropy) {
        loss_bytes += op.memory_bytes;
        ++calls;
      }
      if (op.kernel == Kernel::cast) cast_bytes += op.memory_bytes;
    }
    CHECK(calls == loss_calls);
    // Max; subtract, exp and sum; divide; the gradient's scale: 10 passes of 4 bytes (and the targets',
    // maxima's and sums' few bytes a token).
    CHECK(loss_bytes == Approx(40 * logits).epsilon(1e-3));
    CHECK(loss_bytes > 40 * logits);
    // bf16 → fp32 and back: 2 + 4 bytes a logit each way.
    CHECK(cast_bytes == Approx(12 * logits).epsilon(1e-12));
  }
}

TEST_CASE("training step: a tensor too large to count in bytes is TensorTooLarge, naming its shape",
          "[strategies]") {
  // colossal_z's scores at degree 1: [1, 16, 2^30, 2^30] bf16 elements, 2^65 bytes.
  const ModelSpec model = small_model(true);
  REQUIRE_THROWS_AS(trace_step(colossal_z(), model, 1, int64_t{1} << 30), TensorTooLarge);
  REQUIRE_THROWS_WITH(trace_step(colossal_z(), model, 1, int64_t{1} << 30),
                      Catch::Contains("[1, 16, 1073741824, 1073741824]"));
  REQUIRE_NOTHROW(trace_step(megatron_ts(), model, 1, int64_t{1} << 30));
}

TEST_CASE("training step: a global batch runs each micro-batch's forward and backward, then one optimizer",
          "[strategies]") {
  const ModelSpec model = small_model(true);
  for (const Strategy* strategy : strategies_for(model, 2)) {
    INFO(strategy->name());
    const auto count = [](const Program& program, std::initializer_list<Phase> phases) {
      std::size_t n = 0;  // ops from the first phase on: those before make the step's inputs
      for (OpId id = program.phases.front().first_op; id < program.ops.size(); ++id)
        for (Phase phase : phases) n += program.ops[id].phase == phase ? 1 : 0;
      return n;
    };
    const std::initializer_list<Phase> per_micro_batch = {Phase::embedding_forward, Phase::layer_forward,
                                                          Phase::head, Phase::layer_backward,
                                                          Phase::embedding_backward};
    const Program one = trace_step(*strategy, model, 2, 4096, 2);
    const Program three = trace_step(*strategy, model, 2, 4096, 2, Recompute::none, 0, 1, 3);
    CHECK(count(three, per_micro_batch) == 3 * count(one, per_micro_batch));
    CHECK(count(three, {Phase::optimizer}) == count(one, {Phase::optimizer}));
    // Each micro-batch leaves memory as it found it, so the peak is one micro-batch's, plus the tokens and
    // targets of the two others (2 × [4, 2048] int64 more on this rank).
    CHECK(peak_live_bytes(three) == peak_live_bytes(one) + 2 * 4 * 2048 * 8);
  }
}

TEST_CASE("training step: the host reads the gradient norm, over every gradient once, before any Adam step",
          "[strategies]") {
  for (const Strategy* strategy : {&megatron_ts(), &megatron_tp(), &ulysses_z()})
    for (bool tied : {false, true}) {
      ModelSpec model = small_model(true);
      model.tied_embeddings = tied;
      const int p = 4, layers = 3;
      INFO(strategy->name() << (tied ? ", tied embeddings" : ""));
      StepSpec spec;
      spec.model = &model;
      spec.tokens = 4096;
      spec.plan = uniform_plan(*strategy, layers);
      const Program program = trace_training_step(spec, 0, p);
      std::vector<std::size_t> reads, adams, norms;
      double norm_read_bytes = 0, last_backward = 0;
      for (std::size_t i = 0; i < program.ops.size(); ++i) {
        const Op& op = program.ops[i];
        if (op.kernel == Kernel::read_scalar) reads.push_back(i);
        if (op.kernel == Kernel::adam_step) adams.push_back(i);
        if (op.kernel == Kernel::sum_of_squares) {
          norms.push_back(i);
          norm_read_bytes += op.memory_bytes - 4;  // less its [1] fp32 result
        }
        if (op.phase == Phase::layer_backward || op.phase == Phase::embedding_backward)
          last_backward = static_cast<double>(i);
      }
      REQUIRE(reads.size() == 2);  // the norm, then the loss
      CHECK(static_cast<double>(norms.front()) > last_backward);
      CHECK(reads.front() > norms.back());
      CHECK(reads.front() < adams.front());
      CHECK(reads.back() > adams.back());
      // Every gradient read once: the fp32 main gradients, 4 of the 18 bytes a parameter keeps.
      // This rank's parameters: matrices and tables sharded 1/p, the LayerNorms' gamma and beta whole.
      const double h = as_double(model.hidden);
      const double parameters = layers * (layer_matrix_elements(model) / p + 4 * h) +
                                as_double(padded_vocab(model, p)) * h * (tied ? 1 : 2) / p + 2 * h;
      CHECK(norm_read_bytes == Approx(4 * parameters).epsilon(1e-12));
      // The norm within the limit (a trace reads 0): nothing is scaled. Above it: every gradient is
      // read and written once more (8 bytes a parameter), after the read and each layer's before its
      // first Adam step.
      CHECK(std::none_of(program.ops.begin(), program.ops.end(),
                         [](const Op& op) { return op.kernel == Kernel::scale_; }));
      spec.gradients_clipped = true;
      const Program clipped = trace_training_step(spec, 0, p);
      double scaled_bytes = 0;
      std::size_t read = 0;
      std::map<int, std::size_t> first_scale, first_adam;
      for (std::size_t i = 0; i < clipped.ops.size(); ++i) {
        const Op& op = clipped.ops[i];
        if (op.kernel == Kernel::read_scalar && read == 0) read = i;
        if (op.kernel == Kernel::scale_) {
          scaled_bytes += op.memory_bytes;
          CHECK(read > 0);
          first_scale.try_emplace(op.layer, i);
        }
        if (op.kernel == Kernel::adam_step) first_adam.try_emplace(op.layer, i);
      }
      CHECK(scaled_bytes == Approx(8 * parameters).epsilon(1e-12));
      REQUIRE(first_scale.size() == static_cast<std::size_t>(layers) + 1);  // each layer, then the rest
      for (const auto& [layer, scale] : first_scale) CHECK(scale < first_adam.at(layer));
      spec.gradients_clipped = false;
      // Without a clip there is no norm: the loss is the only read.
      spec.clip_grad_norm = 0;
      const Program unclipped = trace_training_step(spec, 0, p);
      int unclipped_reads = 0, unclipped_norms = 0;
      for (const Op& op : unclipped.ops) {
        unclipped_reads += op.kernel == Kernel::read_scalar;
        unclipped_norms += op.kernel == Kernel::sum_of_squares;
      }
      CHECK(unclipped_reads == 1);
      CHECK(unclipped_norms == 0);
    }
}

TEST_CASE(
    "training step: below the vocabulary's size the embedding and head move activations, above it "
    "the tables",
    "[strategies]") {
  const ModelSpec model = small_model(true);  // V 32,000, h 1,024, untied
  const int p = 4;
  const double h = static_cast<double>(model.hidden);
  const double table_bytes = 2.0 * static_cast<double>(padded_vocab(model, p)) * h;
  // The collectives of the embedding and the head, by their size in bytes.
  const auto sizes = [](const Program& program) {
    std::multiset<double> bytes;
    for (const Op& op : program.ops)
      if (is_communication(op.kind) && (op.phase == Phase::embedding_forward || op.phase == Phase::head ||
                                        op.phase == Phase::embedding_backward))
        bytes.insert(op.size_bytes);
    return bytes;
  };
  for (const Strategy* strategy : strategies_for(model, p)) {
    INFO(strategy->name());
    // 2 × 8,192 tokens, fewer than the vocabulary: the embedding's partial sums reduce-scattered and its
    // gradient's input gathered, the head's input gathered and its gradient reduce-scattered: four
    // [b, s, h] bf16 collectives, no table.
    const double tokens = 2.0 * 8192;
    const std::multiset<double> below = sizes(trace_step(*strategy, model, p, 8192, 2));
    CHECK(below.count(2 * tokens * h) == 4);
    CHECK(below.count(table_bytes) == 0);
    // The rest is the token ids and targets (int64) and the loss's per-token maxima and sums (fp32):
    // p + 2 floats a token.
    double rest = 0;
    for (double bytes : below)
      if (bytes != 2 * tokens * h) rest += bytes;
    CHECK(rest == 2 * 8 * tokens + 4 * (p + 2) * tokens);
    // 2 × 16,384 tokens, more: each table gathered and its gradient reduce-scattered.
    const std::multiset<double> above = sizes(trace_step(*strategy, model, p, 16384, 2));
    CHECK(above.count(table_bytes) == 4);
    CHECK(above.size() == 4);
  }
}
