// A static policy runs one strategy everywhere: where that strategy cannot be priced at all it is
// refused up front; where it needs a tensor no GPU holds, it is out of memory, as any plan that does
// not fit.
#include "selector/static_policy.hpp"

#include <catch2/catch.hpp>

#include "selector/cost_source.hpp"
#include "strategies/library.hpp"
#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;

TEST_CASE("static policy: a strategy too large to trace at a length decides no plan there", "[selector]") {
  ModelSpec model = testing::small_model(true);
  selector::AnalyticCostSource source(model, hw::load_cluster("dgx-a100"), 1);
  selector::StaticPolicy policy(colossal_z(), source);
  const selector::Decision huge = policy.decide(int64_t{1} << 30);  // scores of 2^64 elements
  CHECK(huge.plan.empty());
  CHECK_FALSE(huge.fits);
  CHECK(huge.tokens == int64_t{1} << 30);
  const selector::Decision small = policy.decide(4096);
  CHECK(small.plan.size() == 2);
  CHECK(small.fits);
}
