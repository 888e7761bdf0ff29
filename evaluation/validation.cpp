#include "evaluation/validation.hpp"

#include "common/errors.hpp"
#include "sim/simulator.hpp"

namespace paradyse::evaluation {

std::vector<ValidationRow> simulate_measurements(const std::vector<real::RunRequest>& requests,
                                                 const std::vector<real::RunReport>& reports,
                                                 const ModelSpec& model, const hw::ClusterSpec& cluster,
                                                 int ranks) {
  PARADYSE_CHECK(requests.size() == reports.size(), "a report per request");
  sim::Simulator simulator(model, cluster);
  std::vector<ValidationRow> rows;
  for (std::size_t i = 0; i < requests.size(); ++i)
    for (const real::LengthMeasurement& m : reports[i].lengths) {
      const sim::SimulationResult s = simulator.simulate(
          requests[i].plan, {.tokens = m.seq, .degree = ranks, .batch = requests[i].batch});
      ValidationRow& row = rows.emplace_back();
      row.plan = plan_name(requests[i].plan);
      row.seq = m.seq;
      row.measured_s = m.median_step_s;
      row.simulated_s = s.iteration_time_s;
      row.time_error = (row.simulated_s - row.measured_s) / row.measured_s;
      row.measured_peak_bytes = static_cast<double>(m.peak_bytes);
      row.simulated_peak_bytes = s.peak_memory_bytes;
      row.memory_error = (row.simulated_peak_bytes - row.measured_peak_bytes) / row.measured_peak_bytes;
    }
  return rows;
}

}  // namespace paradyse::evaluation
