// A framework's layer calls (hw::LayerCalls) priced on traced programs: each phase of a Megatron-LM
// layer costs the host the calls that Megatron-LM's code issues for it, under each recomputation.
#include <catch2/catch.hpp>

#include "costmodel/op_time.hpp"
#include "costmodel/program_cost.hpp"
#include "hw_models/cluster.hpp"
#include "hw_models/framework.hpp"
#include "strategies/library.hpp"
#include "strategies/model.hpp"
#include "strategies/training_step.hpp"

using namespace paradyse;

namespace {

// One Megatron-LM GPT layer (Megatron-core at d98e8a64, local spec, tensor parallel with sequence
// parallelism, dropout and biases on), counted from its code: the ATen calls that launch a kernel, the
// calls into torch.compile'd regions (forward: 2 bias-dropout-adds and bias-GeLU; backward: theirs),
// the metadata-only and host calls (views, transposes, detaches, RNG state, waits), and the
// collectives. Without recomputation, and what selective (attention core) and full recomputation add.
struct Count {
  int kernels = 0, forward_regions = 0, backward_regions = 0, host_ops = 0, all_gathers = 0,
      reduce_scatters = 0;
};
constexpr Count kForward{12, 3, 0, 48, 2, 2};
constexpr Count kBackward{33, 0, 3, 79, 4, 2};
constexpr Count kSelectiveForward{0, 0, 0, 3, 0, 0};
constexpr Count kSelectiveBackward{8, 0, 0, 30, 0, 0};
constexpr Count kFullForward{0, 0, 0, 1, 0, 0};
constexpr Count kFullBackward{12, 3, 0, 58, 2, 2};

Count operator+(Count a, const Count& b) {
  return {
      a.kernels + b.kernels,   a.forward_regions + b.forward_regions, a.backward_regions + b.backward_regions,
      a.host_ops + b.host_ops, a.all_gathers + b.all_gathers,         a.reduce_scatters + b.reduce_scatters};
}

// The host's time for a count's calls at the framework's prices.
double priced_s(const hw::LayerCalls& calls, const Count& count) {
  return count.kernels * calls.call_s.at("kernel") +
         count.forward_regions * calls.call_s.at("compiled_region") +
         count.backward_regions * calls.call_s.at("compiled_region_backward") +
         count.host_ops * calls.call_s.at("host_op");
}

hw::ClusterSpec megatron_on_h100() {
  hw::ClusterSpec cluster = hw::load_cluster("dgx-h100");
  hw::use_framework(cluster, hw::load_framework("megatron-lm"));
  return cluster;
}

}  // namespace

TEST_CASE("layer calls: each phase of a Megatron layer costs the calls Megatron-LM's code issues for it",
          "[costmodel]") {
  const hw::ClusterSpec cluster = megatron_on_h100();
  const hw::LayerCalls& calls = *cluster.host.layer_calls;
  const costmodel::OpTimer timer(cluster, 2);
  const ModelSpec model = load_model("gpt-8l");
  for (const auto& [recompute, forward, backward] :
       {std::tuple{Recompute::none, kForward, kBackward},
        std::tuple{Recompute::selective, kForward + kSelectiveForward, kBackward + kSelectiveBackward},
        std::tuple{Recompute::full, kForward + kFullForward, kBackward + kFullBackward}}) {
    INFO(to_string(recompute));
    StepSpec spec;
    spec.model = &model;
    spec.tokens = 1024;
    spec.plan = Plan(static_cast<std::size_t>(model.num_layers), LayerChoice{&megatron_ts(), recompute});
    const Program program = trace_training_step(spec, 0, 2);
    const std::vector<double> issue_s = timer.issue_s(program);
    for (const auto& [phase, count] :
         {std::pair{Phase::layer_forward, forward}, {Phase::layer_backward, backward}}) {
      INFO(to_string(phase));
      double compute_issue_s = 0, communication_issue_s = 0;
      int all_gathers = 0, reduce_scatters = 0;
      for (OpId id = 0; id < program.ops.size(); ++id) {
        const Op& op = program.ops[id];
        if (op.layer != 3 || op.phase != phase || op.kind == OpKind::wait) continue;
        (op.stream == Stream::compute ? compute_issue_s : communication_issue_s) += issue_s[id];
        all_gathers += op.kind == OpKind::all_gather;
        reduce_scatters += op.kind == OpKind::reduce_scatter;
      }
      CHECK(compute_issue_s == Approx(priced_s(calls, count)));
      // The layer's collectives are Megatron's, each at its own issue cost.
      CHECK(all_gathers == count.all_gathers);
      CHECK(reduce_scatters == count.reduce_scatters);
      CHECK(communication_issue_s == Approx(all_gathers * cluster.host.communication_dispatch_s +
                                            reduce_scatters * cluster.host.communication_dispatch_s));
    }
  }
}

TEST_CASE("layer calls: where the host bounds a layer, its phase takes the framework's calls' time",
          "[costmodel]") {
  const hw::ClusterSpec cluster = megatron_on_h100();
  const costmodel::OpTimer timer(cluster, 8);
  // 512 tokens of a small model over 8 GPUs: each layer's GEMMs take microseconds, its calls far more.
  const ModelSpec model = load_model("tiny-gpt");
  StepSpec spec;
  spec.model = &model;
  spec.tokens = 512;
  spec.plan = uniform_plan(megatron_ts(), model.num_layers);
  const Program program = trace_training_step(spec, 0, 8);
  const std::vector<double> issue_s = timer.issue_s(program);
  const double forward_calls_s =
      priced_s(*cluster.host.layer_calls, kForward) + 4 * cluster.host.communication_dispatch_s;
  int layer_phases = 0;
  for (const costmodel::PhaseCost& phase : costmodel::cost_phases(program, timer)) {
    if (phase.phase != Phase::layer_forward || phase.layer == 0) continue;  // the first starts level
    ++layer_phases;
    CHECK(phase.cost.seconds == Approx(forward_calls_s));
    CHECK(phase.cost.host_bound_s > 0.5 * phase.cost.seconds);
  }
  CHECK(layer_phases == model.num_layers - 1);
}
