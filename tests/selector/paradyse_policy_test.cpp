// Each element of the paper's Algorithm 1 on a constructed cost table where it matters.
#include "selector/paradyse_policy.hpp"

#include <catch2/catch.hpp>

#include "tests/selector/constructed_tables.hpp"

using namespace paradyse;
using testing::layer;
using testing::names;
using testing::table;

namespace {
const Strategy& a = megatron_ts();  // labels only: the tables set every cost
const Strategy& b = ulysses_z();
const Strategy& c = metp();

selector::Decision decide(const steps::CostTable& t, selector::ParadyseOptions options = {}) {
  testing::TableSource source({{t.tokens, t}});
  selector::ParadysePolicy policy(source, std::move(options));
  return policy.decide(t.tokens);
}
}  // namespace

TEST_CASE("paradyse: Pareto pruning drops a strategy slower and not leaner than another", "[selector]") {
  // c is slower than b and peaks as high when uniform, so pruning drops it; but c keeps its bytes
  // where b has a large backward transient, and two layers of a then one of c is the only plan that fits.
  const steps::CostTable t =
      table(3, 32, {layer(a, 1, 10, 10, 5), layer(b, 2, 1, 1, 30), layer(c, 3, 11, 11, 0)});
  REQUIRE(t.plan_peak_bytes({2, 2, 2}) == t.plan_peak_bytes({1, 1, 1}));  // c not leaner than b
  const selector::Decision pruned = decide(t);
  CHECK(!pruned.fits);
  CHECK(pruned.fallback);
  selector::ParadyseOptions options;
  options.pruning = false;
  const selector::Decision unpruned = decide(t, options);
  CHECK(unpruned.fits);
  CHECK(names(unpruned.plan) == "megatron_ts,megatron_ts,metp");
  CHECK(unpruned.predicted_s == 5);
  CHECK(unpruned.switches == 1);
}

TEST_CASE("paradyse: early termination takes the fastest strategy when it fits, pricing nothing else",
          "[selector]") {
  const steps::CostTable t =
      table(4, 100, {layer(a, 1, 10, 10, 5), layer(b, 2, 1, 1, 1), layer(c, 3, 1, 1, 0)});
  const selector::Decision early = decide(t);
  CHECK(names(early.plan) == "megatron_ts");
  CHECK(early.evaluated_plans == 3);  // the three uniform plans, to order and prune them
  selector::ParadyseOptions options;
  options.early_termination = false;
  const selector::Decision full = decide(t, options);
  // Plan time is a sum over layers, so no mix beats the fastest uniform plan: the search prices the
  // mixes for nothing and returns the same plan.
  CHECK(names(full.plan) == "megatron_ts");
  CHECK(full.evaluated_plans == 3 + 3 * 3);  // and the mixes of the pairs (a,b), (a,c), (b,c)
}

TEST_CASE("paradyse: two-strategy mixes fit where the fastest strategy does not", "[selector]") {
  // a: fast, 10 bytes kept per layer; b: slow, 1 byte. Uniform a peaks at 4·10 + 5 = 45.
  const steps::CostTable t = table(4, 30, {layer(a, 1, 10, 10, 5), layer(b, 3, 1, 1, 1)});
  const selector::Decision mixed = decide(t);
  CHECK(mixed.fits);
  CHECK(names(mixed.plan) == "megatron_ts,megatron_ts,ulysses_z,ulysses_z");  // 2·10 + 2 + 5 ≤ 30
  CHECK(mixed.predicted_s == 1 + 1 + 3 + 3);
  CHECK(mixed.switches == 1);
  selector::ParadyseOptions options;
  options.mixes = false;
  const selector::Decision uniform = decide(t, options);
  CHECK(names(uniform.plan) == "ulysses_z");
  CHECK(uniform.predicted_s == 12);
}

TEST_CASE("paradyse: the OOM short-circuit ends a mix family at its first plan that does not fit",
          "[selector]") {
  // One layer of a then two of b runs out (b's backward transient sits on 23 kept bytes); two of a then
  // one of b fits (on 19): more layers of the faster strategy need less here, which the short-circuit
  // does not expect.
  const steps::CostTable t = table(3, 30, {layer(a, 1, 5, 25, 0), layer(b, 2, 9, 10, 7.5)});
  REQUIRE(!t.fits({0, 1, 1}));
  REQUIRE(t.fits({0, 0, 1}));
  const selector::Decision cut = decide(t);
  CHECK(!cut.fits);
  CHECK(cut.fallback);
  CHECK(names(cut.plan) == "ulysses_z");  // the leaner uniform plan, reported as not fitting
  selector::ParadyseOptions options;
  options.short_circuit = false;
  const selector::Decision searched = decide(t, options);
  CHECK(searched.fits);
  CHECK(names(searched.plan) == "megatron_ts,megatron_ts,ulysses_z");
}

namespace {
// At 1000 tokens a fits and is fastest, b within 3 %; at 2000 only b fits.
std::map<int64_t, steps::CostTable> two_lengths() {
  return {{1000, table(2, 100, {layer(a, 10, 10, 10, 10), layer(b, 10.3, 1, 1, 1)}, 1000)},
          {2000, table(2, 100, {layer(a, 10, 60, 10, 50), layer(b, 11, 1, 1, 1)}, 2000)}};
}
}  // namespace

TEST_CASE("paradyse: gamma-smoothing keeps the previous plan within 5 % of the best", "[selector]") {
  for (double gamma : {0.05, 0.0}) {
    testing::TableSource source(two_lengths());
    selector::ParadyseOptions options;
    options.gamma = gamma;
    selector::ParadysePolicy policy(source, options);
    CHECK(names(policy.decide(2000).plan) == "ulysses_z");
    const selector::Decision next = policy.decide(1000);
    CAPTURE(gamma);
    CHECK(names(next.plan) == (gamma > 0 ? "ulysses_z" : "megatron_ts"));
    CHECK(next.kept_previous == (gamma > 0));
  }
}

TEST_CASE("paradyse: a packed micro-batch is cached by its documents, in any order, not by its length",
          "[selector]") {
  testing::TableSource source(two_lengths());
  selector::ParadysePolicy policy(source, {});
  CHECK_FALSE(policy.decide(MicroBatch{{300, 700}}).from_cache);
  CHECK(policy.decide(MicroBatch{{700, 300}}).from_cache);
  CHECK(source.requests == 1);
  CHECK_FALSE(policy.decide(MicroBatch{{500, 500}}).from_cache);  // the same 1000 tokens, other costs
  CHECK_FALSE(policy.decide(1000).from_cache);                    // one sequence of them
  CHECK(source.requests == 3);
}

TEST_CASE("paradyse: plans are cached per (batch, length)", "[selector]") {
  for (bool cache : {true, false}) {
    testing::TableSource source(two_lengths());
    selector::ParadyseOptions options;
    options.cache = cache;
    selector::ParadysePolicy policy(source, options);
    CHECK(names(policy.decide(1000).plan) == "megatron_ts");
    CHECK(names(policy.decide(2000).plan) == "ulysses_z");
    // Cached: the plan decided for 1000 tokens. Not cached: decided again after b, and smoothing keeps b.
    const selector::Decision again = policy.decide(1000);
    CAPTURE(cache);
    CHECK(names(again.plan) == (cache ? "megatron_ts" : "ulysses_z"));
    CHECK(again.from_cache == cache);
    CHECK(again.evaluated_plans == (cache ? 0 : 3));
    CHECK(source.requests == (cache ? 2 : 3));
  }
}

TEST_CASE("paradyse: the leanest strategy when nothing fits", "[selector]") {
  // Uniform peaks: a 25, b 9, c 5; the limit is 4.
  const steps::CostTable t =
      table(2, 4, {layer(a, 1, 10, 10, 5), layer(b, 3, 3, 3, 3), layer(c, 5, 2, 1, 1)});
  const selector::Decision fallback = decide(t);
  CHECK(fallback.fallback);
  CHECK(!fallback.fits);
  CHECK(names(fallback.plan) == "metp");
  CHECK(fallback.predicted_peak_bytes == 5);
  selector::ParadyseOptions options;
  options.fallback = false;
  const selector::Decision none = decide(t, options);
  CHECK(none.plan.empty());
  CHECK(!none.fits);
}

TEST_CASE("paradyse: an excluded strategy is never chosen", "[selector]") {
  const steps::CostTable t = table(4, 100, {layer(a, 1, 10, 10, 5), layer(b, 2, 1, 1, 1)});
  selector::ParadyseOptions options;
  options.excluded = {&a};
  const selector::Decision decision = decide(t, options);
  CHECK(names(decision.plan) == "ulysses_z");
}
