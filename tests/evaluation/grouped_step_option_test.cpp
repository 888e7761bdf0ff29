// --groups and --shard-group as users write them.
#include "evaluation/grouped_step_option.hpp"

#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "strategies/library.hpp"

using namespace paradyse;
using namespace paradyse::evaluation;

TEST_CASE("parse_grouped_step: rounds, groups in rank order, packed documents, padding", "[evaluation]") {
  const ModelSpec model = load_model("gpt-8l");  // causal: a group of d ranks pads to a multiple of 2d
  const Plan plan = uniform_plan(ulysses_z(), model.num_layers);
  const GroupedStepSpec spec = parse_grouped_step("4:16K,2:1000,2:4K+10/8:32K", model, plan);
  CHECK(spec.model == &model);
  CHECK(spec.num_layers == 8);
  REQUIRE(spec.rounds.size() == 2);
  REQUIRE(spec.rounds[0].size() == 3);
  CHECK(spec.rounds[0][0].first_rank == 0);
  CHECK(spec.rounds[0][0].degree == 4);
  CHECK(spec.rounds[0][0].micro_batch.tokens == 16384);
  CHECK(spec.rounds[0][1].first_rank == 4);
  CHECK(spec.rounds[0][1].micro_batch.tokens == 1000);  // 1000 is a multiple of 4
  CHECK(spec.rounds[0][1].micro_batch.documents.empty());
  CHECK(spec.rounds[0][2].first_rank == 6);
  CHECK(spec.rounds[0][2].micro_batch.documents == std::vector<int64_t>{4096, 12});
  CHECK(spec.rounds[0][2].micro_batch.tokens == 4108);
  CHECK(spec.rounds[0][2].micro_batch.plan == plan);
  CHECK(spec.rounds[1][0].degree == 8);
  CHECK_NOTHROW(check_grouped_step(spec, 8));

  for (const char* bad : {"", "8", "8:", "0:4K", "x:4K", "8:4K,", "4:4K//4:4K", "8:4K+", "-2:4K"})
    CHECK_THROWS_WITH(parse_grouped_step(bad, model, plan), Catch::Contains("--groups"));
  // Well formed, but rounds over different ranks: refused when the step is checked.
  CHECK_THROWS_WITH(check_grouped_step(parse_grouped_step("4:4K/8:4K", model, plan), 4),
                    Catch::Contains("rounds[1]"));
}

TEST_CASE("parse_shard_group: the job or a node", "[evaluation]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100", 2);
  CHECK(parse_shard_group("job", cluster, 16) == 16);
  CHECK(parse_shard_group("node", cluster, 16) == 8);
  CHECK(parse_shard_group("node", cluster, 4) == 4);
  CHECK_THROWS_WITH(parse_shard_group("rack", cluster, 16), Catch::Contains("--shard-group"));
}
