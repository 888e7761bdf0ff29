// A grouped step (grouped_step.hpp) run for real on 4 ranks: in each round the ranks split into groups
// that train different micro-batches, each with its own per-layer plan, on weights sharded over the
// whole job, or over shard groups of 2 ranks that each hold a replica (hybrid sharding). Its loss and
// every weight's gradient must be the one-device reference's over all the micro-batches of all rounds.
// Tolerance: kFloat32Tolerance, as for one group.
#include <cmath>
#include <map>

#include "strategies/grouped_step.hpp"
#include "tests/real_backend/rank_group.hpp"
#include "tests/real_backend/real_helpers.hpp"
#include "tests/real_backend/reference_model.hpp"

#include "tests/real_backend/catch_after_torch.hpp"  // last: after LibTorch

namespace paradyse::testing {
namespace {

constexpr uint64_t kGroupSeed = 7;
constexpr int kJob = 4;
constexpr int kLayers = 2;

// One group's work and its inputs: tokens and targets [b, s] in natural order.
struct GroupInputs {
  int first_rank, degree;
  std::vector<const char*> plan;  // one strategy per layer
  int64_t batch;
  std::vector<int64_t> documents;  // one entry: a single sequence
  at::Tensor tokens, targets;
};

StepSpec micro_batch_of(const ModelSpec& model, const GroupInputs& work) {
  StepSpec spec;
  spec.model = &model;
  spec.batch = work.batch;
  for (const int64_t length : work.documents) spec.tokens += length;
  if (work.documents.size() > 1) spec.documents = work.documents;
  for (const char* name : work.plan) spec.plan.push_back({find_strategy(name), Recompute::none});
  spec.loss_chunk_tokens = 5;  // several chunks per rank
  return spec;
}

struct GroupedResult {
  at::Tensor loss;
  NamedTensors grads;
};

// Weights sharded over shard groups of `shard_degree` ranks. `clip_grad_norm` 0: the gradients as
// backward leaves them. Every replica of a shard must end with the same gradient: the first shard
// group's are returned.
GroupedResult run_grouped(const ModelSpec& model, const std::vector<std::vector<GroupInputs>>& rounds,
                          int shard_degree = kJob, double clip_grad_norm = 0,
                          DType gradient_reduce_dtype = DType::bf16) {
  GroupedStepSpec spec;
  spec.model = &model;
  spec.num_layers = kLayers;
  spec.clip_grad_norm = clip_grad_norm;
  spec.shard_degree = shard_degree;
  spec.gradient_reduce_dtype = gradient_reduce_dtype;
  for (const auto& works : rounds) {
    Round round;
    for (const GroupInputs& work : works)
      round.push_back({work.first_rank, work.degree, micro_batch_of(model, work)});
    spec.rounds.push_back(std::move(round));
  }
  check_grouped_step(spec, kJob);

  struct RankResult {
    at::Tensor loss;
    NamedTensors grads;
  };
  const auto ranks = run_ranks<RankResult>(
      kJob, model,
      [&](real::TorchBackend& be) {
        be.use_shard_degree(shard_degree);
        ModelShards shards(be, model, kLayers, WeightLayout::job);
        std::vector<Tensor> tokens, targets;
        for (std::size_t r = 0; r < rounds.size(); ++r) {
          const GroupWork& group = group_of(spec.rounds[r], be.job_rank());
          const GroupInputs& work = rounds[r][static_cast<std::size_t>(&group - spec.rounds[r].data())];
          if (group.idle()) {
            tokens.emplace_back();
            targets.emplace_back();
            continue;
          }
          const SequenceLayout layout = step_layout(group.micro_batch, group.degree);
          const int rank = be.job_rank() - group.first_rank;
          tokens.push_back(be.wrap(local_tokens(work.tokens, layout, rank), DType::int64));
          targets.push_back(be.wrap(local_tokens(work.targets, layout, rank), DType::int64));
        }
        RankResult result{torch_of(grouped_training_step(be, spec, shards, tokens, targets)), {}};
        result.grads["embedding"] = torch_of(shards.embedding_grad);
        if (shards.head_grad.defined()) result.grads["head"] = torch_of(shards.head_grad);
        result.grads["final_norm.gamma"] = torch_of(shards.final_norm_gamma_grad);
        if (shards.final_norm_beta_grad.defined())
          result.grads["final_norm.beta"] = torch_of(shards.final_norm_beta_grad);
        for (int l = 0; l < kLayers; ++l)
          result.grads["layers." + std::to_string(l) + ".flat"] =
              torch_of(shards.flat_layer_grads[static_cast<std::size_t>(l)]);
        return result;
      },
      [] {
        real::TorchBackendOptions options;
        options.weight_seed = kGroupSeed;
        options.device = test_device();
        return options;
      }());

  GroupedResult result{at::zeros({1}), {}};
  for (const RankResult& r : ranks) result.loss += r.loss;
  const LayerFlatLayout layout = layer_flat_layout(model);
  for (const auto& [name, grad] : ranks[0].grads) {
    std::vector<at::Tensor> shards;
    for (int r = 0; r < shard_degree; ++r)
      shards.push_back(ranks[static_cast<std::size_t>(r)].grads.at(name));
    for (int r = shard_degree; r < kJob; ++r) {
      INFO("weight " << name << " on rank " << r << ", a replica of rank " << r % shard_degree << "'s shard");
      CHECK(at::equal(ranks[static_cast<std::size_t>(r)].grads.at(name),
                      ranks[static_cast<std::size_t>(r % shard_degree)].grads.at(name)));
    }
    const at::Tensor joined = real::join_shards(name, shards, model);
    if (!name.ends_with(".flat")) {
      result.grads[name] = joined;
      continue;
    }
    const std::string layer = name.substr(0, name.size() - 4);  // "layers.N."
    for (const FlatPart& part : layout.parts) {
      int64_t numel = 1;
      for (const int64_t n : part.shape) numel *= n;
      result.grads[layer + part.name] = joined.narrow(0, part.offset, numel).view(part.shape);
    }
  }
  return result;
}

// The reference: every micro-batch of every round, losses and gradients summed; the vocabulary padded as
// for `shard_degree` ranks.
ReferenceStep reference_of(const ModelSpec& model, const std::vector<std::vector<GroupInputs>>& rounds,
                           int shard_degree = kJob) {
  const NamedTensors weights = reference_weights(model, kLayers, shard_degree, kGroupSeed);
  ReferenceStep whole{at::zeros({}), {}};
  for (const auto& works : rounds)
    for (const GroupInputs& work : works) {
      if (work.documents.empty()) continue;  // idle ranks
      const ReferenceStep part =
          reference_step_by_document(model, weights, kLayers, work.tokens, work.targets, work.documents);
      whole.loss = whole.loss + part.loss;
      for (const auto& [name, grad] : part.grads)
        whole.grads[name] = whole.grads.count(name) ? whole.grads[name] + grad : grad;
    }
  return whole;
}

GroupInputs inputs(const ModelSpec& model, int first_rank, int degree, std::vector<const char*> plan,
                   int64_t batch, std::vector<int64_t> documents) {
  int64_t tokens = 0;
  for (const int64_t length : documents) tokens += length;
  GroupInputs w{first_rank,
                degree,
                std::move(plan),
                batch,
                std::move(documents),
                at::randint(model.vocab, {batch, tokens}, at::kLong),
                at::randint(model.vocab, {batch, tokens}, at::kLong)};
  if (tokens >= 3) w.targets.narrow(1, tokens - 3, 3).fill_(-1);  // padding: no loss there
  return w;
}

void check_against(const GroupedResult& actual, const ReferenceStep& expected) {
  CHECK(relative_error(actual.loss, expected.loss) <= kFloat32Tolerance);
  REQUIRE(actual.grads.size() == expected.grads.size());
  for (const auto& [name, grad] : expected.grads) {
    INFO("weight " << name);
    CHECK(relative_error(actual.grads.at(name), grad) <= kFloat32Tolerance);
  }
}

}  // namespace

TEST_CASE("groups training different micro-batches with different plans compute what one device computes",
          "[real][numerics]") {
  const bool gqa = GENERATE(false, true);
  const bool causal = GENERATE(true, false);
  // Fully sharded, or two shard groups of 2 (hybrid). values(): GENERATE(kJob, 2) would keep a reference to
  // the 2, a temporary gone before it is read.
  const int shard = GENERATE(values({kJob, 2}));
  const ModelSpec model = tiny_model(gqa, causal, kLayers);
  at::manual_seed(static_cast<uint64_t>(gqa * 2 + causal));
  INFO((gqa ? "GQA" : "MHA") << (causal ? ", causal" : ", bidirectional") << ", weights sharded over "
                             << shard << " ranks");

  SECTION("two groups of 2") {
    const std::vector<std::vector<GroupInputs>> rounds{
        {inputs(model, 0, 2, {"megatron_ts", "ulysses_z"}, 2, {8, 16}),
         inputs(model, 2, 2, {"megatron_cz", "metp"}, 1, {24})}};
    check_against(run_grouped(model, rounds, shard), reference_of(model, rounds, shard));
  }
  SECTION("a round that leaves a rank idle: it takes part in the job's collectives only") {
    const std::vector<std::vector<GroupInputs>> rounds{
        {inputs(model, 0, 2, {"ulysses_z", "megatron_ts"}, 1, {16}), inputs(model, 2, 1, {}, 1, {}),
         inputs(model, 3, 1, {"megatron_tp", "metp"}, 1, {6, 4})}};
    check_against(run_grouped(model, rounds, shard), reference_of(model, rounds, shard));
  }
  SECTION("a group of 2 and two of 1, then two of 2: groups change between rounds") {
    const std::vector<std::vector<GroupInputs>> rounds{
        {inputs(model, 0, 2, {"megatron_tp", "colossal_z"}, 1, {16}),
         inputs(model, 2, 1, {"megatron_ts", "ulysses_z"}, 2, {12}),
         inputs(model, 3, 1, {"metp", "megatron_cz"}, 1, {4, 6})},
        {inputs(model, 0, 2, {"metp", "megatron_tp"}, 1, {8, 8}),
         inputs(model, 2, 2, {"colossal_z", "megatron_ts"}, 1, {20})}};
    check_against(run_grouped(model, rounds, shard), reference_of(model, rounds, shard));
  }
  SECTION(
      "rounds in which half the job trains nothing: under hybrid sharding that shard group skips them, "
      "and each shard group's last round differs") {
    const std::vector<std::vector<GroupInputs>> rounds{
        {inputs(model, 0, 2, {"ulysses_z", "megatron_ts"}, 1, {8, 8}),
         inputs(model, 2, 2, {"metp", "megatron_cz"}, 1, {12})},
        {inputs(model, 0, 1, {"megatron_tp", "metp"}, 1, {10}), inputs(model, 1, 1, {}, 1, {}),
         inputs(model, 2, 1, {}, 1, {}), inputs(model, 3, 1, {}, 1, {})},
        {inputs(model, 0, 1, {}, 1, {}), inputs(model, 1, 1, {}, 1, {}),
         inputs(model, 2, 2, {"megatron_ts", "ulysses_z"}, 2, {8, 12})}};
    check_against(run_grouped(model, rounds, shard), reference_of(model, rounds, shard));
  }
}

TEST_CASE("gradients summed and reduce-scattered in fp32 (FSDP's reduce_dtype) are the one device's too",
          "[real][numerics]") {
  // The tables' gradients are cast to fp32 before their reduction; the layers' are summed in fp32.
  const ModelSpec model = tiny_model(false, true, kLayers);
  at::manual_seed(5);
  const int shard = GENERATE(values({kJob, 2}));
  INFO("weights sharded over " << shard << " ranks");
  const std::vector<std::vector<GroupInputs>> rounds{
      {inputs(model, 0, 2, {"megatron_ts", "ulysses_z"}, 1, {8, 8}), inputs(model, 2, 1, {}, 1, {}),
       inputs(model, 3, 1, {"metp", "megatron_cz"}, 1, {12})}};
  check_against(run_grouped(model, rounds, shard, 0, DType::fp32), reference_of(model, rounds, shard));
}

TEST_CASE("hybrid sharding: gradients clipped by the norm of the whole gradient, each shard counted once",
          "[real][numerics]") {
  // Two shard groups of 2: each shard is held twice and the final norm by every rank; summed over the
  // job without weights, the norm would count them 2 and 4 times.
  const ModelSpec model = tiny_model(true, true, kLayers);
  at::manual_seed(11);
  const std::vector<std::vector<GroupInputs>> rounds{
      {inputs(model, 0, 2, {"megatron_ts", "metp"}, 1, {8, 8}),
       inputs(model, 2, 1, {"ulysses_z", "ulysses_z"}, 1, {12}),
       inputs(model, 3, 1, {"megatron_cz", "megatron_tp"}, 1, {10})}};
  const int shard = 2;
  const ReferenceStep expected = reference_of(model, rounds, shard);
  double squared = 0;
  for (const auto& [name, grad] : expected.grads) squared += grad.pow(2).sum().item<double>();
  const double norm = std::sqrt(squared);
  for (const double clip : {norm / 4, 2 * norm}) {
    INFO("clip " << clip << ", norm " << norm);
    const GroupedResult clipped = run_grouped(model, rounds, shard, clip);
    const double coefficient = std::min(1.0, clip / (norm + 1e-6));
    for (const auto& [name, grad] : expected.grads) {
      INFO("weight " << name);
      CHECK(relative_error(clipped.grads.at(name), grad * coefficient) <= kFloat32Tolerance);
    }
  }
}

TEST_CASE("a grouped step's groups must cover the job, in rank order, at degrees their strategies allow",
          "[real][numerics]") {
  const ModelSpec model = tiny_model(false, true, kLayers);
  const auto spec_of = [&](std::vector<std::pair<int, int>> groups, const char* strategy, int64_t tokens) {
    GroupedStepSpec spec;
    spec.model = &model;
    spec.num_layers = kLayers;
    Round round;
    for (auto [first, degree] : groups) {
      StepSpec micro;
      micro.model = &model;
      micro.tokens = tokens;
      micro.plan = uniform_plan(*find_strategy(strategy), kLayers);
      round.push_back({first, degree, micro});
    }
    spec.rounds.push_back(round);
    return spec;
  };
  CHECK_NOTHROW(check_grouped_step(spec_of({{0, 2}, {2, 1}, {3, 1}}, "megatron_ts", 16), kJob));
  CHECK_THROWS_WITH(check_grouped_step(spec_of({{0, 2}, {2, 1}}, "megatron_ts", 16), kJob),
                    Catch::Contains("covering the job's 4 ranks, got 3"));
  CHECK_THROWS_WITH(check_grouped_step(spec_of({{0, 2}, {3, 1}, {2, 1}}, "megatron_ts", 16), kJob),
                    Catch::Contains("should start at rank 2"));
  CHECK_THROWS_WITH(check_grouped_step(spec_of({{0, 3}, {3, 1}}, "megatron_ts", 12), kJob),
                    Catch::Contains("megatron_ts"));
  CHECK_THROWS_WITH(check_grouped_step(spec_of({{0, 2}, {2, 2}}, "megatron_ts", 10), kJob),
                    Catch::Contains("multiple"));
  GroupedStepSpec three_shards = spec_of({{0, 2}, {2, 2}}, "megatron_ts", 16);
  three_shards.shard_degree = 3;
  CHECK_THROWS_WITH(check_grouped_step(three_shards, kJob),
                    Catch::Contains("shard group") && Catch::Contains("divides the job's 4, got 3"));
}

}  // namespace paradyse::testing
