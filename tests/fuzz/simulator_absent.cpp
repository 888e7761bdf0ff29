// The fuzz build has no SimGrid. Reading a sweep spec checks each point's group policies, which live in
// evaluation/group_compare.cpp beside the code that simulates them, so that file and what it calls are
// linked, and the simulator's entry points, which reading a spec never reaches,
// are these: reaching one is an InternalError, a finding.
#include "common/errors.hpp"
#include "sim/simulator.hpp"

namespace paradyse::sim {

struct Simulator::Engine {};

namespace {

[[noreturn]] void absent() {
  throw InternalError("the simulator was called while reading an input file (the fuzz build has none)");
}

}  // namespace

Simulator::Simulator(ModelSpec model, hw::ClusterSpec cluster, SimulationOptions options)
    : model_(std::move(model)), cluster_(std::move(cluster)), options_(std::move(options)) {
  absent();
}

Simulator::~Simulator() = default;

SimulationResult Simulator::simulate(const Plan&, const costmodel::EstimateRequest&) {
  absent();
}

SimulationResult Simulator::simulate_grouped(const GroupedStepSpec&) {
  absent();
}

}  // namespace paradyse::sim
