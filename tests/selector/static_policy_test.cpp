// A static policy runs one strategy everywhere, with one recomputation: where that cannot be priced at
// all it is refused up front; where it needs a tensor no GPU holds, it is out of memory, as any plan
// that does not fit.
#include "selector/static_policy.hpp"

#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "selector/cost_source.hpp"
#include "selector/policy.hpp"
#include "strategies/library.hpp"
#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;

TEST_CASE("static policy: a strategy too large to trace at a length decides no plan there", "[selector]") {
  ModelSpec model = testing::small_model(true);
  selector::AnalyticCostSource source(model, hw::load_cluster("dgx-a100"), 1);
  selector::StaticPolicy policy({&colossal_z()}, source);
  const selector::Decision huge = policy.decide(int64_t{1} << 30);  // scores of 2^64 elements
  CHECK(huge.plan.empty());
  CHECK_FALSE(huge.fits);
  CHECK(huge.tokens == int64_t{1} << 30);
  const selector::Decision small = policy.decide(4096);
  CHECK(small.plan.size() == 2);
  CHECK(small.fits);
}

TEST_CASE("static policy: names with a recomputation, and the names refused", "[selector]") {
  const auto spec = [](const std::string& name) { return selector::parse_static_policy(name); };
  CHECK_FALSE(spec("paradyse").has_value());
  CHECK(spec("static:ulysses_z")->strategy == &ulysses_z());
  CHECK(spec("static:ulysses_z")->recompute == Recompute::none);
  CHECK(spec("static:megatron_ts:full")->recompute == Recompute::full);
  CHECK(spec("static:metp:offload")->recompute == Recompute::offload);
  for (const std::string name : {"static:ulysses_z", "static:megatron_ts:selective", "static:metp:offload"})
    CHECK(selector::static_policy_name(*spec(name)) == name);
  CHECK_THROWS_WITH(spec("static:ulysses_z:none"),
                    Catch::Contains("static:NAME:selective, :full or :offload"));
  CHECK_THROWS_WITH(spec("static:ulysses_z:fast"), Catch::Contains("got 'static:ulysses_z:fast'"));
  CHECK_THROWS_WITH(spec("static:metp:full"), Catch::Contains("metp recomputes its layers"));
  CHECK_THROWS_WITH(spec("static:nope:offload"), Catch::Contains("unknown strategy 'nope'"));
  CHECK(spec("static:ulysses_z:offload:3")->offloaded_layers == 3);
  CHECK(spec("static:ulysses_z:offload")->offloaded_layers == 0);
  CHECK(selector::static_policy_name(*spec("static:ulysses_z:offload:3")) == "static:ulysses_z:offload:3");
  for (const std::string bad :
       {"static:ulysses_z:full:3", "static:ulysses_z:offload:0", "static:ulysses_z:offload:x",
        "static:ulysses_z:offload:", "static:ulysses_z:offload:99999999"})
    CHECK_THROWS_WITH(spec(bad), Catch::Contains("static:NAME:offload:K") && Catch::Contains(bad));
}

TEST_CASE("static policy: with offload it trains what the plain static cannot, where the host link allows",
          "[selector]") {
  const ModelSpec model = load_model("llama-8l");
  selector::AnalyticCostSource source(model, hw::load_cluster("dgx-a100"), 8);
  const auto policy = [&](const std::string& name) { return selector::make_policy(name, source); };
  const int64_t tokens = 262144;
  const selector::Decision kept = policy("static:ulysses_z")->decide(tokens);
  const selector::Decision offloaded = policy("static:ulysses_z:offload")->decide(tokens);
  CHECK_FALSE(kept.fits);
  REQUIRE(offloaded.fits);
  REQUIRE(offloaded.plan.size() == static_cast<std::size_t>(model.num_layers));
  for (const LayerChoice& layer : offloaded.plan) {
    CHECK(layer.strategy == &ulysses_z());
    CHECK(layer.recompute == Recompute::offload);
  }
  CHECK(offloaded.predicted_peak_bytes < kept.predicted_peak_bytes);
  // Full recomputation, priced by the cost table, fits too, and costs a forward more than offload.
  const selector::Decision recomputed = policy("static:ulysses_z:full")->decide(tokens);
  CHECK(recomputed.fits);
  CHECK(recomputed.predicted_s > offloaded.predicted_s);

  // Megatron-LM's --cpu-offloading-num-layers: the first layers only, the rest keep theirs.
  const selector::Decision some = policy("static:ulysses_z:offload:3")->decide(tokens);
  REQUIRE(some.plan.size() == offloaded.plan.size());
  for (std::size_t l = 0; l < some.plan.size(); ++l)
    CHECK(some.plan[l].recompute == (l < 3 ? Recompute::offload : Recompute::none));
  CHECK(some.predicted_peak_bytes > offloaded.predicted_peak_bytes);
  CHECK(some.predicted_peak_bytes < kept.predicted_peak_bytes);

  hw::ClusterSpec no_link = hw::load_cluster("dgx-a100");
  no_link.gpu.host_link_bytes_per_second = 0;
  no_link.gpu.host_memory_bytes = 0;
  selector::AnalyticCostSource without(model, no_link, 8);
  CHECK_THROWS_WITH(selector::make_policy("static:ulysses_z:offload", without),
                    Catch::Contains("host link") && Catch::Contains("static:ulysses_z:offload"));
}
