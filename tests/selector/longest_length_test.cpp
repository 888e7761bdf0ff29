// The longest trainable length by bisection: it fits, one more token does not, and the decision that
// comes with it is the policy's at that length.
#include "selector/longest_length.hpp"

#include <catch2/catch.hpp>

#include "hw_models/cluster.hpp"
#include "selector/cost_source.hpp"
#include "steps/estimate.hpp"

namespace paradyse::testing {

TEST_CASE("longest length: the boundary between fitting and not", "[selector][longest]") {
  const ModelSpec model = load_model("gpt-8l");
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  selector::AnalyticCostSource source(model, cluster, 8, 1);
  for (const char* name : {"static:megatron_ts", "static:metp", "optimal"}) {
    INFO(name);
    auto policy = selector::make_policy(name, source);
    const selector::LongestLength longest = selector::longest_length(*policy, 16 * 1024 * 1024);
    REQUIRE(longest.tokens > 0);
    CHECK(longest.decision.fits);
    CHECK(longest.decision.tokens == longest.tokens);
    CHECK(policy->decide(longest.tokens).fits);
    CHECK_FALSE(policy->decide(longest.tokens + 1).fits);
    CHECK(longest.tokens % 16 == 0);  // lengths pad to 2p tokens: the boundary is a padded length
  }
}

TEST_CASE("longest length: capped at the longest length tried, 0 when nothing fits", "[selector][longest]") {
  const ModelSpec model = load_model("gpt-8l");
  selector::AnalyticCostSource source(model, hw::load_cluster("dgx-a100"), 8, 1);
  auto policy = selector::make_policy("static:metp", source);
  CHECK(selector::longest_length(*policy, 1000).tokens == 1000);

  hw::ClusterSpec tiny = hw::load_cluster("dgx-a100");
  tiny.gpu.hbm_bytes = 1e9;  // not even the weights fit
  selector::AnalyticCostSource starved(model, tiny, 8, 1);
  auto starved_policy = selector::make_policy("static:metp", starved);
  const selector::LongestLength none = selector::longest_length(*starved_policy, 1 << 20);
  CHECK(none.tokens == 0);
  CHECK(none.decision.plan.empty());
}

}  // namespace paradyse::testing
