#include "sim/simulator.hpp"

#include <algorithm>
#include <exception>

#include "common/errors.hpp"
#include "sim/executor.hpp"
#include "sim/memory_timeline.hpp"
#include "sim/platform.hpp"

namespace paradyse::sim {
namespace sg4 = simgrid::s4u;

struct Simulator::Engine {
  Engine(const hw::ClusterSpec& cluster, int num_gpus) : platform(cluster, num_gpus) {}
  Platform platform;

  // Runs `body` inside an actor of the engine; exceptions thrown there come out here.
  template <typename Body>
  void run(Body body) {
    std::exception_ptr failure;
    sg4::Actor::create("paradyse", platform.gpu(0), [&] {
      try {
        body();
      } catch (...) {
        failure = std::current_exception();
      }
    });
    platform.engine().run();
    if (failure) std::rethrow_exception(failure);
  }
};

namespace {
bool simulator_alive = false;  // SimGrid has one engine per process, so one Simulator at a time
}  // namespace

std::string collective_algorithm_description(const SimulationOptions& options) {
  if (options.max_flows_per_collective == 0)
    return "every collective takes the analytic model's time on the routed network (its flows' most loaded "
           "link, or past 2^18 flows the bus-bandwidth formula): no flows are simulated";
  return "NCCL ring (pipelined; one ring per NIC across nodes, rail-aligned) for all-gather, "
         "reduce-scatter and all-reduce; pipelined chain on the ring for broadcast and reduce; pairwise "
         "flows for all-to-all and send/recv; collectives needing more than " +
         std::to_string(options.max_flows_per_collective) +
         " flows take the analytic model's time (their flows' most loaded link, or past 2^18 flows "
         "the bus-bandwidth formula)";
}

Simulator::Simulator(hw::ClusterSpec cluster, SimulationOptions options)
    : cluster_(std::move(cluster)), options_(std::move(options)) {
  if (cluster_.num_gpus() < 1)
    throw InputError(cluster_.source, 0, "gpus_per_node", "expected a cluster with at least one GPU");
  hw::check_spine_oversubscription(cluster_);
  if (simulator_alive || sg4::Engine::has_instance())
    throw InternalError("a second Simulator while another is alive: SimGrid has one engine per process");
  simulator_alive = true;
}

Simulator::~Simulator() {
  engine_.reset();
  simulator_alive = false;
}

int Simulator::built_gpus() const {
  return engine_ ? engine_->platform.num_gpus() : 0;
}

Simulator::Engine& Simulator::engine_for(int num_gpus) {
  if (!engine_ || engine_->platform.num_gpus() < num_gpus) {
    engine_.reset();  // SimGrid's engine goes before the next one is made
    engine_ = std::make_unique<Engine>(cluster_, num_gpus);
  }
  return *engine_;
}

SimulationResult Simulator::run(std::vector<Program> programs, double static_bytes) {
  if (programs.empty() || static_cast<int>(programs.size()) > cluster_.num_gpus())
    throw InputError("", 0, "degree",
                     "expected between 1 and the " + std::to_string(cluster_.num_gpus()) + " GPUs of " +
                         cluster_.name + " ranks, got " + std::to_string(programs.size()));
  Engine& engine = engine_for(static_cast<int>(programs.size()));
  Execution execution;
  engine.run([&] { execution = execute(engine.platform, cluster_, programs, options_); });

  SimulationResult result;
  result.degree = static_cast<int>(programs.size());
  result.iteration_time_s = execution.seconds;
  result.per_rank = std::move(execution.per_rank);
  result.kernels = execution.kernels;
  result.flows = execution.flows;
  result.analytic_collectives = execution.analytic_collectives;
  result.capacity_bytes = cluster_.tensor_capacity_bytes();
  for (std::size_t r = 0; r < programs.size(); ++r) {
    const MemoryFold memory = fold_memory(programs[r], static_cast<int>(r), static_bytes,
                                          cluster_.gpu.allocator_fragmentation, result.capacity_bytes);
    result.per_rank[r].peak_memory_bytes = memory.peak_bytes;
    result.peak_memory_bytes = std::max(result.peak_memory_bytes, memory.peak_bytes);
    if (memory.oom && !result.oom_at) result.oom_at = memory.oom;
    const MemoryEvent host = host_memory_peak(programs[r]);
    result.host_peak_bytes = std::max(result.host_peak_bytes, static_cast<double>(host.bytes));
    if (static_cast<double>(host.bytes) > cluster_.gpu.host_memory_bytes && !result.oom_at) {
      const Op& at = programs[r].ops[std::min<std::size_t>(host.before_op, programs[r].ops.size() - 1)];
      result.oom_at = OutOfMemory{static_cast<int>(r),
                                  at.phase,
                                  at.layer,
                                  "host memory of offloaded activations",
                                  static_cast<double>(host.bytes),
                                  cluster_.gpu.host_memory_bytes};
    }
    if (!options_.record_timeline) continue;
    RankTimeline& timeline = execution.timeline[r];
    for (std::size_t e = 0; e < programs[r].memory.size(); ++e) {
      const OpId before = programs[r].memory[e].before_op;
      const double time =
          before < timeline.op_start_s.size() ? timeline.op_start_s[before] : execution.seconds;
      timeline.memory.emplace_back(time, memory.held_bytes[e]);
    }
  }
  result.oom = result.oom_at.has_value();
  if (options_.record_timeline) {
    result.programs = std::move(programs);
    result.timeline = std::move(execution.timeline);
  }
  return result;
}

std::vector<double> Simulator::transfer_s(const std::vector<Transfer>& transfers) {
  std::vector<double> seconds(transfers.size());
  int num_gpus = 1;
  for (const Transfer& t : transfers) {
    PARADYSE_CHECK(t.from != t.to && t.from >= 0 && t.to >= 0 && t.from < cluster_.num_gpus() &&
                       t.to < cluster_.num_gpus(),
                   "a transfer between two distinct GPUs of the cluster");
    num_gpus = std::max({num_gpus, t.from + 1, t.to + 1});
  }
  Engine& engine = engine_for(num_gpus);
  engine.run([&] {
    const double origin = sg4::Engine::get_clock();
    std::vector<sg4::CommPtr> comms;
    for (const Transfer& t : transfers)
      comms.push_back(sg4::Comm::sendto_async(engine.platform.gpu(t.from), engine.platform.gpu(t.to),
                                              static_cast<uint64_t>(t.bytes)));
    for (std::size_t i = 0; i < comms.size(); ++i) {
      comms[i]->wait();
      seconds[i] = sg4::Engine::get_clock() - origin;
    }
  });
  return seconds;
}

}  // namespace paradyse::sim
