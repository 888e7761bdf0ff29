// A decision's JSON: the keys `paradyse plan --json` has always printed, the plan one name per layer.
#include "selector/decision_json.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "strategies/library.hpp"
#include "tests/json_keys.hpp"

using namespace paradyse;

TEST_CASE("decision JSON: the documented keys, one strategy name per layer", "[selector]") {
  selector::Decision d;
  d.policy = "paradyse";
  d.tokens = 4000;
  d.padded_tokens = 4096;
  d.plan = {{&megatron_ts(), Recompute::none}, {&metp(), Recompute::full}, {&metp(), Recompute::full}};
  d.predicted_s = 1.5;
  d.predicted_peak_bytes = 7e10;
  d.fits = true;
  d.switches = 1;
  d.evaluated_plans = 12;
  d.kept_previous = true;
  const nlohmann::json j = d;
  CHECK(testing::json_keys(j) == std::set<std::string>{"policy", "seq", "padded_seq", "plan",
                                                       "predicted_time_s", "predicted_peak_bytes", "fits",
                                                       "switches", "fallback", "kept_previous", "from_cache",
                                                       "evaluated_plans"});
  CHECK(j.at("seq") == 4000);
  CHECK(j.at("padded_seq") == 4096);
  REQUIRE(j.at("plan").size() == 3);
  CHECK(j.at("plan")[0] == plan_name({d.plan[0]}));
  CHECK(j.at("plan")[1] == plan_name({d.plan[1]}));
  CHECK(j.at("plan")[1] != j.at("plan")[0]);
  CHECK(j.at("predicted_time_s") == 1.5);
  CHECK(j.at("evaluated_plans") == 12);
  CHECK(j.at("kept_previous") == true);
  CHECK(j.at("from_cache") == false);
}
