#include "steps/step_simulator.hpp"

#include "steps/step_programs.hpp"

namespace paradyse::steps {

StepSimulator::StepSimulator(ModelSpec model, hw::ClusterSpec cluster, sim::SimulationOptions options)
    : model_(std::move(model)), simulator_(std::move(cluster), std::move(options)) {}

TraceProgress StepSimulator::tracing_progress() const {
  if (!simulator_.options().progress) return {};
  return [this](int traced, int ranks) {
    simulator_.options().progress("tracing", static_cast<uint64_t>(traced), static_cast<uint64_t>(ranks));
  };
}

sim::SimulationResult StepSimulator::simulate(const Plan& plan, const EstimateRequest& request_in) {
  const EstimateRequest request = checked_request(model_, cluster(), plan, request_in);
  StepPrograms step = trace_plan_step(model_, cluster(), plan, request, tracing_progress());
  sim::SimulationResult result = simulator_.run(std::move(step.programs), step.static_bytes);
  result.plan = plan_name(plan);
  result.tokens = request.tokens;
  result.padded_tokens = step.padded_tokens;
  result.documents = step.documents;
  result.batch = request.batch;
  result.micro_batches = request.micro_batches;
  return result;
}

sim::SimulationResult StepSimulator::simulate_grouped(const GroupedStepSpec& spec) {
  StepPrograms step = trace_grouped_step_programs(spec, cluster(), tracing_progress());
  sim::SimulationResult result = simulator_.run(std::move(step.programs), step.static_bytes);
  result.plan = "groups";
  result.micro_batches = static_cast<int64_t>(spec.rounds.size());
  return result;
}

}  // namespace paradyse::steps
