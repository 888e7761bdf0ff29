// The fuzz build has no SimGrid. Reading a sweep spec checks each point's group policies, which live in
// evaluation/group_compare.cpp beside the code that simulates them, so that file and what it calls are
// linked, and the simulator's entry points, which reading a spec never reaches,
// are these: reaching one is an InternalError, a finding.
#include "common/errors.hpp"
#include "steps/step_simulator.hpp"

namespace paradyse {
namespace {

[[noreturn]] void absent() {
  throw InternalError("the simulator was called while reading an input file (the fuzz build has none)");
}

}  // namespace

namespace sim {

struct Simulator::Engine {};

Simulator::Simulator(hw::ClusterSpec cluster, SimulationOptions options)
    : cluster_(std::move(cluster)), options_(std::move(options)) {
  absent();
}

Simulator::~Simulator() = default;

Simulator::Engine& Simulator::engine_for(int) {
  absent();
}

}  // namespace sim

namespace steps {

StepSimulator::StepSimulator(ModelSpec model, hw::ClusterSpec cluster, sim::SimulationOptions options)
    : model_(std::move(model)), simulator_(std::move(cluster), std::move(options)) {}

sim::SimulationResult StepSimulator::simulate(const Plan&, const EstimateRequest&) {
  absent();
}

sim::SimulationResult StepSimulator::simulate_grouped(const GroupedStepSpec&) {
  absent();
}

}  // namespace steps
}  // namespace paradyse
