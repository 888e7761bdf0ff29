// The tracer and the real backend see the same ops: a whole training step of each strategy issues,
// on every rank, the same communication calls in the same order (kind, group, bytes, peers) on
// both backends, so what the simulator prices is what the real run does.
#include "program/tracing_backend.hpp"
#include "strategies/grouped_step.hpp"
#include "strategies/library.hpp"
#include "tests/real_backend/rank_group.hpp"
#include "tests/real_backend/real_helpers.hpp"

#include "tests/real_backend/catch_after_torch.hpp"  // last: after LibTorch

namespace paradyse::real {
// How Catch prints a call when the sequences differ.
std::ostream& operator<<(std::ostream& out, const CommunicationCall& c) {
  constexpr const char* kGroups[] = {"group", "shard group", "replicas", "job"};
  return out << to_string(c.kind) << "(" << kGroups[static_cast<int>(c.group)] << " from rank "
             << c.group_first << " of " << c.group_size << " every " << c.group_stride << ", " << c.size_bytes
             << " B, root " << c.root << ", to " << c.send_to << ", from " << c.recv_from << ")";
}
}  // namespace paradyse::real

namespace paradyse::testing {
namespace {

std::vector<real::CommunicationCall> traced_calls(const Program& program) {
  std::vector<real::CommunicationCall> calls;
  for (const Op& op : program.ops)
    if (is_communication(op.kind))
      calls.push_back({op.kind, op.group, op.group_first, op.group_size, op.group_stride, op.size_bytes,
                       op.bus_bytes, op.root, op.send_to, op.recv_from});
  return calls;
}

}  // namespace

TEST_CASE("tracer and real backend issue the same communication calls", "[real]") {
  const Strategy& strategy = *all_strategies()[GENERATE(range(size_t{0}, all_strategies().size()))];
  const bool gqa = GENERATE(false, true);
  const bool packed = GENERATE(false, true);  // documents of 8, 16 and 8 tokens, or one of 32
  const ModelSpec model = tiny_model(gqa, /*causal=*/true);
  const int degree = 4;
  if (strategy.unsupported(model, degree)) return;  // usp_u4, usp_u8: their groups need more ranks
  StepSpec spec;
  spec.model = &model;
  spec.tokens = 32;
  if (packed) spec.documents = {8, 16, 8};
  spec.plan = uniform_plan(strategy, 2, Recompute::selective);
  spec.loss_chunk_tokens = 5;
  INFO(strategy.name() << (gqa ? ", GQA" : ", MHA") << (packed ? ", packed" : ""));

  const auto real_calls =
      run_ranks<std::vector<real::CommunicationCall>>(degree, model, [&](real::TorchBackend& be) {
        ModelShards shards(be, model, 2);
        const Tensor tokens = be.wrap(at::zeros({1, spec.tokens / degree}, at::kLong), DType::int64);
        training_step(be, spec, shards, tokens, tokens);
        return be.communication_calls();
      });
  for (int rank = 0; rank < degree; ++rank) {
    INFO("rank " << rank);
    const std::vector<real::CommunicationCall> traced = traced_calls(trace_training_step(spec, rank, degree));
    REQUIRE(!traced.empty());
    CHECK(real_calls[static_cast<std::size_t>(rank)] == traced);
  }
}

TEST_CASE("tracer and real backend issue the same communication calls in a grouped step", "[real]") {
  // Two rounds on 4 ranks: a group of 2 and two of 1, then two of 2, every strategy in some group;
  // weights sharded over the job, or over two shard groups of 2 (hybrid sharding).
  const bool gqa = GENERATE(false, true);
  const int shard = GENERATE(4, 2);
  const ModelSpec model = tiny_model(gqa, /*causal=*/true);
  INFO((gqa ? "GQA" : "MHA") << ", weights sharded over " << shard << " ranks");
  const int job = 4, layers = 2;
  const auto group = [&](int first, int degree, const char* a, const char* b,
                         std::vector<int64_t> documents) {
    StepSpec micro;
    micro.model = &model;
    for (const int64_t length : documents) micro.tokens += length;
    if (documents.size() > 1) micro.documents = documents;
    micro.plan = {{find_strategy(a), Recompute::none}, {find_strategy(b), Recompute::selective}};
    micro.loss_chunk_tokens = 5;
    return GroupWork{first, degree, micro};
  };
  GroupedStepSpec spec;
  spec.model = &model;
  spec.num_layers = layers;
  spec.shard_degree = shard;
  spec.rounds = {{group(0, 2, "megatron_tp", "colossal_z", {16}),
                  group(2, 1, "megatron_ts", "ulysses_z", {12}), group(3, 1, "metp", "megatron_cz", {4, 6})},
                 {group(0, 2, "metp", "ulysses_z", {8, 8}), group(2, 2, "megatron_cz", "megatron_ts", {24})}};
  check_grouped_step(spec, job);

  const auto real_calls =
      run_ranks<std::vector<real::CommunicationCall>>(job, model, [&](real::TorchBackend& be) {
        be.use_shard_degree(shard);
        ModelShards shards(be, model, layers, WeightLayout::job);
        std::vector<Tensor> tokens;
        for (const Round& round : spec.rounds) {
          const GroupWork& mine = group_of(round, be.job_rank());
          tokens.push_back(
              be.wrap(at::zeros({1, mine.micro_batch.tokens / mine.degree}, at::kLong), DType::int64));
        }
        grouped_training_step(be, spec, shards, tokens, tokens);
        return be.communication_calls();
      });
  for (int rank = 0; rank < job; ++rank) {
    INFO("rank " << rank);
    const std::vector<real::CommunicationCall> traced = traced_calls(trace_grouped_step(spec, rank, job));
    REQUIRE(!traced.empty());
    CHECK(real_calls[static_cast<std::size_t>(rank)] == traced);
  }
}

}  // namespace paradyse::testing
