// A training step on the discrete-event simulator: a plan's step (one strategy per layer) or a grouped
// step, traced into every rank's program (step_programs.hpp) and run by sim::Simulator on the cluster.
//
// Usage:
//   steps::StepSimulator simulator(model, cluster);
//   sim::SimulationResult r = simulator.simulate(plan, {.tokens = 131072});
//
// Like sim::Simulator, one exists at a time (SimGrid has one engine per process).
#pragma once

#include "hw_models/cluster.hpp"
#include "sim/simulator.hpp"
#include "steps/step_programs.hpp"
#include "strategies/grouped_step.hpp"
#include "strategies/model.hpp"
#include "strategies/strategy.hpp"

namespace paradyse::steps {

class StepSimulator {
 public:
  StepSimulator(ModelSpec model, hw::ClusterSpec cluster, sim::SimulationOptions options = {});

  // One iteration of `plan` at request.tokens (padded as the strategies require) on request.degree
  // ranks (0: every GPU). Throws InputError on an invalid request.
  sim::SimulationResult simulate(const Plan& plan, const EstimateRequest& request);
  // One grouped step (grouped_step.hpp) on ranks 0..N−1, N the ranks its rounds' groups cover: every
  // group of a round runs at once, on its own GPUs, and all share the network. Throws InputError on an
  // invalid step, or a group that spans nodes without starting a node and filling whole nodes (NCCL's
  // rings per rail are laid out for those).
  sim::SimulationResult simulate_grouped(const GroupedStepSpec& spec);

  // The program-level simulator underneath, for programs traced elsewhere.
  sim::Simulator& simulator() { return simulator_; }
  const ModelSpec& model() const { return model_; }
  const hw::ClusterSpec& cluster() const { return simulator_.cluster(); }

 private:
  // Reports tracing to the options' progress, if set.
  TraceProgress tracing_progress() const;
  ModelSpec model_;
  sim::Simulator simulator_;
};

}  // namespace paradyse::steps
