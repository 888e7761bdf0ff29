// Every strategy, run for real on 2 and 4 ranks, against the one-device reference (reference_model.hpp):
// one layer's output, input gradient and weight gradients, and a 2-layer model's loss and every
// weight's gradient, causal and not, MHA with GELU/LayerNorm and GQA with SwiGLU/RMSNorm; and a packed
// sequence of documents against the reference run document by document.
// Tolerance: kFloat32Tolerance (max |a − b| / max |b| ≤ 1e-4) in float32.
#include <map>

#include "strategies/layer.hpp"
#include "strategies/library.hpp"
#include "strategies/strategy.hpp"
#include "tests/real_backend/rank_group.hpp"
#include "tests/real_backend/real_helpers.hpp"
#include "tests/real_backend/reference_model.hpp"

#include "tests/real_backend/catch_after_torch.hpp"  // last: after LibTorch

namespace paradyse::testing {
namespace {

constexpr uint64_t kSeed = 7;

real::TorchBackendOptions fp32_options() {
  real::TorchBackendOptions options;
  options.weight_seed = kSeed;
  options.device = test_device();
  return options;
}
const std::vector<std::string> kLayerWeights = {"qkv", "proj", "mlp_in", "mlp_out"};
const std::vector<std::string> kNormWeights = {"norm1.gamma", "norm1.beta", "norm2.gamma", "norm2.beta"};

// What one rank computed for one layer: y and d_x on its tokens, its weight-shard gradients and its
// partial sums of the (replicated) norm gradients.
struct LayerResult {
  at::Tensor y, d_x;
  std::map<std::string, at::Tensor> grads;
};

std::map<std::string, const Tensor*> by_name(const LayerWeights& w) {
  return {{"qkv", &w.qkv},
          {"proj", &w.proj},
          {"mlp_in", &w.mlp_in},
          {"mlp_out", &w.mlp_out},
          {"norm1.gamma", &w.norm1_gamma},
          {"norm1.beta", &w.norm1_beta},
          {"norm2.gamma", &w.norm2_gamma},
          {"norm2.beta", &w.norm2_beta}};
}

// A packed sequence's documents (each a multiple of 2p for p = 2 and 4): the short ones give each rank
// a single token per zig-zag chunk at p = 4.
const std::vector<int64_t> kDocuments = {8, 32, 8, 16};

// The one-device reference over packed documents: each document a sequence of its own; outputs and
// input gradients laid end to end, weight gradients summed.
ReferenceLayer reference_layer_by_document(const ModelSpec& model, const NamedTensors& weights,
                                           const at::Tensor& x, const at::Tensor& d_y,
                                           const std::vector<int64_t>& documents) {
  ReferenceLayer whole;
  std::vector<at::Tensor> ys, d_xs;
  int64_t begin = 0;
  for (const int64_t length : documents) {
    ReferenceLayer part =
        reference_layer(model, weights, 0, x.narrow(1, begin, length), d_y.narrow(1, begin, length));
    ys.push_back(part.y);
    d_xs.push_back(part.d_x);
    for (auto& [name, grad] : part.grads)
      whole.grads[name] = whole.grads.count(name) ? whole.grads[name] + grad : grad;
    begin += length;
  }
  whole.y = at::cat(ys, 1);
  whole.d_x = at::cat(d_xs, 1);
  return whole;
}

// `documents`: a packed sequence of them, against the reference run document by document; empty: one
// sequence of 32 tokens.
// `options`: the backend's (the test device's, fp32, by default).
void check_layer(const Strategy& strategy, const ModelSpec& model, int degree, Recompute recompute,
                 const std::vector<int64_t>& documents = {},
                 const real::TorchBackendOptions& options = fp32_options()) {
  const int64_t b = 2;
  const SequenceLayout layout = documents.empty() ? SequenceLayout(32, degree, model.causal)
                                                  : SequenceLayout(documents, degree, model.causal);
  const int64_t s = layout.tokens();
  const at::Tensor x = at::randn({b, s, model.hidden}, at::TensorOptions(at::kFloat));
  const at::Tensor d_y = at::randn({b, s, model.hidden});
  const std::vector<LayerResult> results = run_ranks<LayerResult>(
      degree, model,
      [&](real::TorchBackend& be) {
        ModelShards shards(be, model, 1);
        const LayerContext ctx{model, layout, b, recompute};
        const Tensor x_local = be.wrap(local_tokens(x, layout, be.rank()), DType::bf16);
        LayerForward forward = layer_forward(be, strategy, ctx, shards.layers[0], x_local);
        const Tensor d_x =
            layer_backward(be, strategy, ctx, shards.layers[0], std::move(forward.saved),
                           be.wrap(local_tokens(d_y, layout, be.rank()), DType::bf16), shards.layer_grads[0]);
        LayerResult result{torch_of(forward.y), torch_of(d_x), {}};
        for (const auto& [name, grad] : by_name(shards.layer_grads[0]))
          if (grad->defined()) result.grads[name] = torch_of(*grad);
        return result;
      },
      options);

  const NamedTensors weights = reference_weights(model, 1, degree, kSeed);
  const ReferenceLayer expected = documents.empty()
                                      ? reference_layer(model, weights, 0, x, d_y)
                                      : reference_layer_by_document(model, weights, x, d_y, documents);
  std::vector<at::Tensor> ys, d_xs;
  for (const LayerResult& r : results) {
    ys.push_back(r.y);
    d_xs.push_back(r.d_x);
  }
  CHECK(relative_error(place_tokens(ys, layout), expected.y) <= kFloat32Tolerance);
  CHECK(relative_error(place_tokens(d_xs, layout), expected.d_x) <= kFloat32Tolerance);
  for (const std::string& name : kLayerWeights) {
    std::vector<at::Tensor> shards;
    for (const LayerResult& r : results) shards.push_back(r.grads.at(name));
    INFO("weight " << name);
    CHECK(relative_error(real::join_shards("layers.0." + name, shards, model), expected.grads.at(name)) <=
          kFloat32Tolerance);
  }
  for (const std::string& name : kNormWeights) {
    if (!expected.grads.count(name)) continue;
    INFO("weight " << name);
    if (strategy.replicates_tokens()) {  // every rank ran every token: each has the whole gradient
      for (const LayerResult& r : results)
        CHECK(relative_error(r.grads.at(name), expected.grads.at(name)) <= kFloat32Tolerance);
      continue;
    }
    at::Tensor sum = at::zeros_like(expected.grads.at(name));
    for (const LayerResult& r : results) sum += r.grads.at(name);  // each rank's tokens' share
    CHECK(relative_error(sum, expected.grads.at(name)) <= kFloat32Tolerance);
  }
}

// Loss and every weight's gradient after one training step of `plan`, joined over ranks.
struct StepResult {
  at::Tensor loss;
  std::map<std::string, at::Tensor> grads;
};

// `clip_grad_norm` 0: the gradients as backward leaves them, to compare with the reference's.
StepResult run_step(const ModelSpec& model, int degree, const Plan& plan, const at::Tensor& tokens,
                    const at::Tensor& targets, double clip_grad_norm = 0,
                    const std::vector<int64_t>& documents = {}) {
  StepSpec spec;
  spec.model = &model;
  spec.tokens = tokens.size(1);
  spec.documents = documents;
  spec.batch = tokens.size(0);
  spec.plan = plan;
  spec.clip_grad_norm = clip_grad_norm;
  spec.loss_chunk_tokens = 5;  // several chunks per rank
  const SequenceLayout layout = step_layout(spec, degree);
  using Shards = std::map<std::string, at::Tensor>;
  struct RankResult {
    at::Tensor loss;
    Shards grads;
  };
  const auto ranks = run_ranks<RankResult>(
      degree, model,
      [&](real::TorchBackend& be) {
        ModelShards shards(be, model, static_cast<int>(plan.size()));
        const Tensor loss =
            training_step(be, spec, shards, be.wrap(local_tokens(tokens, layout, be.rank()), DType::int64),
                          be.wrap(local_tokens(targets, layout, be.rank()), DType::int64));
        RankResult r{torch_of(loss), {}};
        r.grads["embedding"] = torch_of(shards.embedding_grad);
        if (shards.head_grad.defined()) r.grads["head"] = torch_of(shards.head_grad);
        r.grads["final_norm.gamma"] = torch_of(shards.final_norm_gamma_grad);
        if (shards.final_norm_beta_grad.defined())
          r.grads["final_norm.beta"] = torch_of(shards.final_norm_beta_grad);
        for (std::size_t l = 0; l < plan.size(); ++l)
          for (const auto& [name, grad] : by_name(shards.layer_grads[l]))
            if (grad->defined()) r.grads["layers." + std::to_string(l) + "." + name] = torch_of(*grad);
        return r;
      },
      fp32_options());
  StepResult result{at::zeros({1}), {}};
  for (const RankResult& r : ranks) result.loss += r.loss;
  for (const auto& [name, grad] : ranks[0].grads) {
    std::vector<at::Tensor> shards;
    for (const RankResult& r : ranks) shards.push_back(r.grads.at(name));
    result.grads[name] = real::join_shards(name, shards, model);
  }
  return result;
}

void check_step(const StepResult& actual, const ReferenceStep& expected) {
  CHECK(relative_error(actual.loss, expected.loss) <= kFloat32Tolerance);
  REQUIRE(actual.grads.size() == expected.grads.size());
  for (const auto& [name, grad] : expected.grads) {
    INFO("weight " << name);
    CHECK(relative_error(actual.grads.at(name), grad) <= kFloat32Tolerance);
  }
}

struct StepInputs {
  at::Tensor tokens, targets;
};

StepInputs step_inputs(const ModelSpec& model, int64_t tokens) {
  StepInputs in{at::randint(model.vocab, {2, tokens}, at::kLong),
                at::randint(model.vocab, {2, tokens}, at::kLong)};
  in.targets.narrow(1, tokens - 3, 3).fill_(-1);  // padding: no loss there
  return in;
}

// On a GPU one rank runs too, over NCCL (rank_group.hpp), as `paradyse run --device cuda` runs it; on
// the CPU the tests keep to the degrees that communicate, which CI's time is spent on.
std::vector<int> with_one_rank_on_gpu(std::vector<int> degrees) {
  if (test_device().is_cuda() && degrees.front() == 2) degrees.insert(degrees.begin(), 1);
  return degrees;
}

void check_strategy(const std::string& name, const std::vector<int>& degrees = {2, 4}) {
  const Strategy& strategy = *find_strategy(name);
  const int degree = GENERATE_COPY(from_range(with_one_rank_on_gpu(degrees)));
  const bool gqa = GENERATE(false, true);
  const bool causal = GENERATE(true, false);
  const ModelSpec model = tiny_model(gqa, causal);
  at::manual_seed(static_cast<uint64_t>(degree * 4 + gqa * 2 + causal));
  INFO(name << " on " << degree << " ranks, " << (gqa ? "GQA" : "MHA")
            << (causal ? ", causal" : ", bidirectional"));
  SECTION("one layer: output, input gradient, weight gradients") {
    check_layer(strategy, model, degree, Recompute::none);
  }
  SECTION("one layer with full recomputation") {
    check_layer(strategy, model, degree, Recompute::full);
  }
  SECTION("one layer with the unfused attention kernel, and with selective recomputation of either kernel") {
    ModelSpec unfused = model;
    unfused.attention_kernel = AttentionKernel::unfused;
    check_layer(strategy, unfused, degree, Recompute::none);
    check_layer(strategy, unfused, degree, Recompute::selective);
    check_layer(strategy, model, degree, Recompute::selective);
  }
  SECTION("a 2-layer model: loss and every weight's gradient") {
    // 2 × 32 tokens, more than the 45-row vocabulary: the embedding and head gather the tables.
    const StepInputs in = step_inputs(model, 32);
    check_step(run_step(model, degree, uniform_plan(strategy, 2), in.tokens, in.targets),
               reference_step(model, reference_weights(model, 2, degree, kSeed), 2, in.tokens, in.targets));
  }
  SECTION("a 2-layer model with the first layer's activations offloaded to host memory and back") {
    const StepInputs in = step_inputs(model, 32);
    check_step(run_step(model, degree, uniform_plan(strategy, 2, Recompute::offload), in.tokens, in.targets),
               reference_step(model, reference_weights(model, 2, degree, kSeed), 2, in.tokens, in.targets));
  }
  SECTION("a 2-layer model on fewer tokens than the vocabulary: the embedding and head vocabulary-parallel") {
    // 2 × 16 tokens: each rank embeds and scores every token on its rows of the (tied, under GQA) tables.
    const StepInputs in = step_inputs(model, 16);
    check_step(run_step(model, degree, uniform_plan(strategy, 2), in.tokens, in.targets),
               reference_step(model, reference_weights(model, 2, degree, kSeed), 2, in.tokens, in.targets));
  }
  SECTION("packed documents: one layer and a 2-layer model, against the reference run document by document") {
    check_layer(strategy, model, degree, Recompute::none, kDocuments);
    const StepInputs in = step_inputs(model, 64);
    check_step(run_step(model, degree, uniform_plan(strategy, 2), in.tokens, in.targets, 0, kDocuments),
               reference_step_by_document(model, reference_weights(model, 2, degree, kSeed), 2, in.tokens,
                                          in.targets, kDocuments));
  }
}

}  // namespace

TEST_CASE("megatron_ts computes what one device computes", "[real][numerics]") {
  check_strategy("megatron_ts");
}
TEST_CASE("megatron_cz computes what one device computes", "[real][numerics]") {
  check_strategy("megatron_cz");
}
TEST_CASE("ulysses_z computes what one device computes", "[real][numerics]") {
  check_strategy("ulysses_z");
}
TEST_CASE("colossal_z computes what one device computes", "[real][numerics]") {
  check_strategy("colossal_z");
}
TEST_CASE("metp computes what one device computes", "[real][numerics]") {
  check_strategy("metp");
}
TEST_CASE("megatron_tp computes what one device computes", "[real][numerics]") {
  check_strategy("megatron_tp");
}
TEST_CASE("usp_u2 (Ulysses over 2 ranks × a ring of 2 groups) computes what one device computes",
          "[real][numerics]") {
  check_strategy("usp_u2", {4});
}
TEST_CASE("tp_cp_t2 (tensor parallel over 2 ranks × a ring of 2 groups) computes what one device computes",
          "[real][numerics]") {
  check_strategy("tp_cp_t2", {4});
}

TEST_CASE("attention as variable-length tiles computes what one device computes", "[real][numerics]") {
  // What a GPU runs (varlen_attention.hpp), with the exact attention as each tile's kernel: the whole
  // sequence (Megatron), its zig-zag chunks gathered out of order (Ulysses) and a ring's blocks.
  real::TorchBackendOptions options = fp32_options();
  options.varlen_attention = true;
  const std::string name = GENERATE(as<std::string>(), "megatron_ts", "megatron_cz", "ulysses_z");
  const int degree = GENERATE(2, 4);
  const bool gqa = GENERATE(false, true);
  const bool causal = GENERATE(true, false);
  const ModelSpec model = tiny_model(gqa, causal);
  at::manual_seed(static_cast<uint64_t>(degree * 4 + gqa * 2 + causal));
  INFO(name << " on " << degree << " ranks, " << (gqa ? "GQA" : "MHA")
            << (causal ? ", causal" : ", bidirectional"));
  check_layer(*find_strategy(name), model, degree, Recompute::none, {}, options);
  check_layer(*find_strategy(name), model, degree, Recompute::none, kDocuments, options);
}

TEST_CASE("the unfused loss kernel computes what the fused one does, on either head", "[real][numerics]") {
  const ModelSpec model = tiny_model(false, true);
  ModelSpec unfused = model;
  unfused.loss_kernel = LossKernel::unfused;
  at::manual_seed(11);
  // 2 × 32 tokens gather the 45-row tables; 2 × 16 score every token on each rank's rows.
  for (const int64_t tokens : {32, 16}) {
    INFO(tokens << " tokens");
    const StepInputs in = step_inputs(model, tokens);
    check_step(run_step(unfused, 2, uniform_plan(megatron_ts(), 2), in.tokens, in.targets),
               reference_step(model, reference_weights(model, 2, 2, kSeed), 2, in.tokens, in.targets));
  }
}

TEST_CASE("dropout: a replicated tensor's mask is the same on every rank, a rank's own part's is not",
          "[real][numerics]") {
  // megatron_tp's layer runs its dropouts on every token alike on every rank: different masks would
  // make the ranks' copies of the residual stream drift apart.
  using Masks = std::pair<at::Tensor, at::Tensor>;
  const std::vector<Masks> masks = run_ranks<Masks>(
      2, tiny_model(false, true),
      [](real::TorchBackend& be) {
        const Tensor x = be.wrap(at::ones({4, 256}), DType::bf16);
        return Masks{torch_of(be.dropout(x, 0.5, MaskStream::replicated).mask),
                     torch_of(be.dropout(x, 0.5, MaskStream::per_rank).mask)};
      },
      fp32_options());
  CHECK(at::equal(masks[0].first, masks[1].first));
  CHECK_FALSE(at::equal(masks[0].second, masks[1].second));
}

TEST_CASE("gradient clipping: above the clip every gradient is the reference's scaled to it, below untouched",
          "[real][numerics]") {
  // One layer of every strategy, so that each one's sharded and replicated gradients count in the norm.
  const int degree = 2;
  const std::vector<const Strategy*> strategies = strategies_for(tiny_model(true, true), degree);
  const int layers = static_cast<int>(strategies.size());
  const ModelSpec model = tiny_model(true, true, layers);
  at::manual_seed(13);
  const StepInputs in = step_inputs(model, 32);
  const ReferenceStep expected =
      reference_step(model, reference_weights(model, layers, degree, kSeed), layers, in.tokens, in.targets);
  double norm_squared = 0;
  for (const auto& [name, grad] : expected.grads)
    norm_squared += grad.to(at::kDouble).square().sum().item<double>();
  const double norm = std::sqrt(norm_squared);
  Plan mixed;
  for (const Strategy* s : strategies) mixed.push_back({s, Recompute::none});
  for (const double clip : {norm / 4, 2 * norm}) {
    INFO("clip " << clip << ", norm " << norm);
    const StepResult clipped = run_step(model, degree, mixed, in.tokens, in.targets, clip);
    const double coefficient = std::min(1.0, clip / (norm + 1e-6));
    for (const auto& [name, grad] : expected.grads) {
      INFO("weight " << name);
      CHECK(relative_error(clipped.grads.at(name), grad * coefficient) <= kFloat32Tolerance);
    }
  }
}

TEST_CASE("a plan that switches strategy at every layer computes what every pure plan does",
          "[real][numerics]") {
  // The unified layout makes switching free: no collective between layers, and the same numbers.
  const bool causal = GENERATE(true, false);
  const int degree = 2;
  const std::vector<const Strategy*> strategies = strategies_for(tiny_model(true, causal), degree);
  const int layers = static_cast<int>(strategies.size());
  const ModelSpec model = tiny_model(true, causal, layers);
  at::manual_seed(11);
  const StepInputs in = step_inputs(model, 32);
  const ReferenceStep expected =
      reference_step(model, reference_weights(model, layers, degree, kSeed), layers, in.tokens, in.targets);
  Plan mixed;
  for (const Strategy* s : strategies) mixed.push_back({s, Recompute::none});
  std::reverse(mixed.begin() + 2, mixed.end());  // neighbours differ in both directions
  const StepResult switching = run_step(model, degree, mixed, in.tokens, in.targets);
  INFO("plan " << plan_name(mixed));
  check_step(switching, expected);
  for (const Strategy* s : strategies) {
    INFO("pure plan " << s->name());
    const StepResult pure = run_step(model, degree, uniform_plan(*s, layers), in.tokens, in.targets);
    CHECK(relative_error(switching.loss, pure.loss) <= kFloat32Tolerance);
    for (const auto& [name, grad] : pure.grads) {
      INFO("weight " << name);
      CHECK(relative_error(switching.grads.at(name), grad) <= kFloat32Tolerance);
    }
  }
}

TEST_CASE("a plan that switches between 1-D and 2-D strategies at every layer computes what one device does",
          "[real][numerics]") {
  // On 4 ranks, where usp_u2 and tp_cp_t2 run as 2 groups of 2 × a ring of 2: their layers sit between
  // 1-D ones that use the same [b, s/p, h] shards and the same weight shards, so nothing moves between
  // layers.
  const bool causal = GENERATE(true, false);
  const int degree = 4;
  const std::vector<const Strategy*> two_d{find_strategy("usp_u2"), find_strategy("tp_cp_t2")};
  Plan mixed;
  for (const Strategy* s : strategies_for(tiny_model(true, causal), degree))
    if (std::find(two_d.begin(), two_d.end(), s) == two_d.end())
      mixed.insert(mixed.end(), {{s, Recompute::none}, {two_d[mixed.size() / 2 % 2], Recompute::none}});
  const int layers = static_cast<int>(mixed.size());
  const ModelSpec model = tiny_model(true, causal, layers);
  at::manual_seed(17);
  const StepInputs in = step_inputs(model, 32);
  INFO("plan " << plan_name(mixed));
  check_step(
      run_step(model, degree, mixed, in.tokens, in.targets),
      reference_step(model, reference_weights(model, layers, degree, kSeed), layers, in.tokens, in.targets));
}

TEST_CASE("more ranks than key/value heads: USP computes what one device does, the 1-D strategies refuse",
          "[real][numerics]") {
  // 2 key/value heads of 8 dimensions on 4 ranks: each rank holds 4 of the 16 key rows, half a head.
  // The paper's strategies need whole heads on every rank; usp_u2 gathers the weights whole and its
  // all-to-all over 2 ranks hands out whole heads, so it runs.
  const bool causal = GENERATE(true, false);
  const int degree = 4;
  ModelSpec model = tiny_model(true, causal);
  model.kv_heads = 2;
  const Strategy& usp = *find_strategy("usp_u2");
  CHECK(strategies_for(model, degree) == std::vector<const Strategy*>{&usp});
  at::manual_seed(19);
  const StepInputs in = step_inputs(model, 32);
  INFO((causal ? "causal" : "bidirectional"));
  check_step(run_step(model, degree, uniform_plan(usp, 2), in.tokens, in.targets),
             reference_step(model, reference_weights(model, 2, degree, kSeed), 2, in.tokens, in.targets));
}

}  // namespace paradyse::testing
