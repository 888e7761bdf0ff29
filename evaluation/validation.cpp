#include "evaluation/validation.hpp"

#include <algorithm>
#include <map>

#include "common/errors.hpp"
#include "costmodel/op_time.hpp"
#include "steps/step_simulator.hpp"
#include "strategies/training_step.hpp"

namespace paradyse::evaluation {

std::vector<ValidationRow> simulate_measurements(const std::vector<real::RunRequest>& requests,
                                                 const std::vector<real::RunReport>& reports,
                                                 const ModelSpec& model, const hw::ClusterSpec& cluster,
                                                 int ranks) {
  PARADYSE_CHECK(requests.size() == reports.size(), "a report per request");
  steps::StepSimulator simulator(model, cluster);
  std::vector<ValidationRow> rows;
  for (std::size_t i = 0; i < requests.size(); ++i)
    for (const real::LengthMeasurement& m : reports[i].lengths) {
      const sim::SimulationResult s = simulator.simulate(
          requests[i].plan,
          {.tokens = m.seq, .degree = ranks, .batch = requests[i].batch, .documents = requests[i].documents});
      ValidationRow& row = rows.emplace_back();
      row.plan = plan_name(requests[i].plan);
      row.seq = m.seq;
      row.documents = std::max<int64_t>(1, static_cast<int64_t>(requests[i].documents.size()));
      row.measured_s = m.median_step_s;
      row.measured_steps = static_cast<int>(m.step_s.size());
      row.rounds_run = m.rounds_run;
      row.rounds_kept = m.rounds_kept;
      row.simulated_s = s.iteration_time_s;
      row.time_error = (row.simulated_s - row.measured_s) / row.measured_s;
      row.measured_peak_bytes = static_cast<double>(m.peak_bytes);
      row.simulated_peak_bytes = s.peak_memory_bytes;
      row.memory_error = (row.simulated_peak_bytes - row.measured_peak_bytes) / row.measured_peak_bytes;
      row.allocator_peak_bytes = static_cast<double>(m.process_peak_bytes);
      if (row.allocator_peak_bytes > 0)
        row.allocator_memory_error =
            (row.simulated_peak_bytes - row.allocator_peak_bytes) / row.allocator_peak_bytes;
      row.time_error_at_calibration_speed = row.time_error;
      if (cluster.calibration && m.reference_before_s > 0 && m.reference_after_s > 0) {
        row.reference_ratio =
            (m.reference_before_s + m.reference_after_s) / 2 / cluster.calibration->seconds();
        const double at_calibration_speed_s = row.measured_s / row.reference_ratio;
        row.time_error_at_calibration_speed =
            (row.simulated_s - at_calibration_speed_s) / at_calibration_speed_s;
      }
    }
  return rows;
}

std::vector<KernelTimeRow> kernel_times(const std::vector<real::RunRequest>& requests,
                                        const std::vector<real::RunReport>& reports, const ModelSpec& model,
                                        const hw::ClusterSpec& cluster, int ranks) {
  PARADYSE_CHECK(requests.size() == reports.size(), "a report per request");
  const costmodel::OpTimer timer(cluster, ranks);
  std::vector<KernelTimeRow> rows;
  for (std::size_t i = 0; i < requests.size(); ++i)
    for (const real::LengthMeasurement& m : reports[i].lengths) {
      std::map<std::string, KernelTimeRow> by_kernel;
      auto row = [&](const std::string& kernel) -> KernelTimeRow& {
        KernelTimeRow& r = by_kernel[kernel];
        r.plan = plan_name(requests[i].plan);
        r.seq = m.seq;
        r.kernel = kernel;
        return r;
      };
      for (const real::TimedOp& op : reports[i].ops)
        if (op.seq == m.seq) {
          KernelTimeRow& r = row(op.op);
          r.measured_s += op.seconds;
          ++r.calls;
        }
      StepSpec spec;
      spec.model = &model;
      spec.tokens = m.seq;
      spec.documents = requests[i].documents;
      spec.batch = requests[i].batch;
      spec.plan = requests[i].plan;
      // A measured call's time includes its host's dispatch, as the model's does.
      for (const Op& op : trace_training_step(spec, 0, ranks).ops)
        row(std::string(op.kernel == Kernel::communication ? to_string(op.kind) : to_string(op.kernel)))
            .modelled_s += timer.dispatch_s(op) + timer.seconds(op);
      const std::size_t first = rows.size();
      for (auto& [kernel, r] : by_kernel) rows.push_back(std::move(r));
      std::sort(rows.begin() + static_cast<std::ptrdiff_t>(first), rows.end(),
                [](const KernelTimeRow& a, const KernelTimeRow& b) { return a.measured_s > b.measured_s; });
    }
  return rows;
}

}  // namespace paradyse::evaluation
