// simulate_measurements: a measured run against the simulator on the calibrated cluster, with the
// machine's drift since the calibration shown apart from the model's error.
#include "evaluation/validation.hpp"

#include <catch2/catch.hpp>

#include "steps/step_simulator.hpp"
#include "strategies/strategy.hpp"

namespace paradyse::testing {

TEST_CASE("simulate_measurements: a run on a machine 20 % slower than calibrated is exact at its speed",
          "[evaluation]") {
  const ModelSpec model = load_model("tiny-gpt");
  hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  cluster.calibration = hw::CalibrationReference{0.09, 0.11};  // 0.1 s at calibration

  real::RunRequest request;
  request.model = &model;
  request.plan = uniform_plan(*find_strategy("ulysses_z"), model.num_layers);
  request.lengths = {1024};
  double simulated_s = 0;
  {
    steps::StepSimulator simulator(model, cluster);  // one per process at a time (SimGrid's engine)
    simulated_s = simulator.simulate(request.plan, {.tokens = 1024, .degree = 8}).iteration_time_s;
  }

  // The reference took 0.12 s around the run: the machine ran 1.2x slower, and so did the step.
  real::RunReport report;
  real::LengthMeasurement& m = report.lengths.emplace_back();
  m.seq = 1024;
  m.median_step_s = 1.2 * simulated_s;
  m.peak_bytes = 1 << 20;
  m.reference_before_s = 0.115;
  m.reference_after_s = 0.125;
  const std::vector<evaluation::ValidationRow> rows =
      evaluation::simulate_measurements({request}, {report}, model, cluster, 8);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].reference_ratio == Approx(1.2));
  CHECK(rows[0].time_error == Approx(1 / 1.2 - 1));
  CHECK(rows[0].time_error_at_calibration_speed == Approx(0).margin(1e-9));

  // Without a reference on either side the row has no ratio and one error.
  report.lengths[0].reference_after_s = 0;
  const evaluation::ValidationRow unreferenced =
      evaluation::simulate_measurements({request}, {report}, model, cluster, 8)[0];
  CHECK(unreferenced.reference_ratio == 0);
  CHECK(unreferenced.time_error_at_calibration_speed == unreferenced.time_error);
}

}  // namespace paradyse::testing
