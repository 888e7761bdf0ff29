// The accuracy report's JSON: per model and range, the points and the errors of time and memory, and
// null errors where no point was compared.
#include "steps/accuracy_json.hpp"

#include <catch2/catch.hpp>

using namespace paradyse;

TEST_CASE("accuracy JSON: errors per model and range, null where nothing was compared",
          "[costmodel][accuracy]") {
  steps::AccuracyReport report;
  report.points = 2;
  report.learned.inside.time.add(110, 100);    // 10 %
  report.learned.inside.time.add(70, 100);     // 30 %
  report.learned.inside.memory.add(100, 100);  // 0 %
  report.learned.inside.memory.add(105, 100);  // 5 %
  const nlohmann::json j = report;
  CHECK(j.at("points") == 2);
  const nlohmann::json& inside = j.at("learned").at("inside");
  CHECK(inside.at("points") == 2);
  CHECK(inside.at("time").at("mean_ape_pct").get<double>() == Approx(20));
  CHECK(inside.at("time").at("max_ape_pct").get<double>() == Approx(30));
  CHECK(inside.at("memory").at("max_ape_pct").get<double>() == Approx(5));
  for (const nlohmann::json& empty : {j.at("learned").at("outside"), j.at("analytic").at("inside")}) {
    CHECK(empty.at("points") == 0);
    CHECK(empty.at("time").is_null());
    CHECK(empty.at("memory").is_null());
  }
}
