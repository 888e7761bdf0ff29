#include "steps/estimate.hpp"

#include "strategies/grouped_step.hpp"

#include <algorithm>
#include <numeric>

#include "common/limits.hpp"
#include "strategies/training_step.hpp"

namespace paradyse::steps {

struct Estimator::StrategyCosts {
  double initial_live_bytes = 0;  // the step's inputs (tokens, targets)
  costmodel::SegmentCost embedding_forward, layer_forward, head, layer_backward, embedding_backward;
  costmodel::SegmentCost layer_optimizer, model_optimizer;
};

Estimator::Estimator(ModelSpec model, hw::ClusterSpec cluster)
    : model_(std::move(model)),
      cluster_(std::move(cluster)),
      routed_(std::make_shared<const costmodel::RoutedCollectiveTimer>(cluster_)) {}
Estimator::~Estimator() = default;

void Estimator::clear_cache() {
  traced_.clear();
  estimates_.clear();
}

std::optional<std::string> Estimator::unsupported(const Strategy& strategy, int degree) const {
  return strategy.unsupported(model_, degree);
}

namespace {

// Rank 0's program of a step of `plan` over a micro-batch of these padded documents.
Program traced_step(const ModelSpec& model, const Plan& plan, const std::vector<int64_t>& padded_documents,
                    int64_t batch, bool gradients_clipped, int degree) {
  StepSpec spec;
  spec.model = &model;
  spec.tokens = std::accumulate(padded_documents.begin(), padded_documents.end(), int64_t{0});
  if (padded_documents.size() > 1) spec.documents = padded_documents;
  spec.batch = batch;
  spec.plan = plan;
  spec.gradients_clipped = gradients_clipped;
  return trace_training_step(spec, 0, degree);
}

// What a program holds before its first phase: the step's inputs (tokens, targets).
double initial_live_bytes(const Program& program) {
  double bytes = 0;
  const uint32_t first_event = program.phases.empty() ? 0 : program.phases.front().first_memory_event;
  for (uint32_t e = 0; e < first_event; ++e) bytes += static_cast<double>(program.memory[e].bytes);
  return bytes;
}

}  // namespace

const Estimator::StrategyCosts& Estimator::strategy_costs(const Strategy& strategy, int degree,
                                                          const std::vector<int64_t>& padded_documents,
                                                          int64_t batch, Recompute recompute,
                                                          bool gradients_clipped) {
  auto key = std::make_tuple(&strategy, degree, padded_documents, batch, recompute, gradients_clipped);
  auto found = traced_.find(key);
  if (found != traced_.end()) return *found->second;
  // A layer priced alone cannot say what offloading it saves: its copies run under its neighbours, and
  // the last layer keeps its own. Such plans are priced whole (estimate); a cost table cannot hold them.
  if (recompute == Recompute::offload)
    throw InputError("--recompute", 0, "",
                     "activation offload is priced on whole programs only, not one layer at a time: estimate "
                     "or simulate the plan, or let compare's policies choose it (static:NAME:offload, "
                     "--recompute-choices)");

  // One layer of this strategy inside a whole step, so that its phases are those of any layer.
  const Program program =
      traced_step(model_, {{&strategy, recompute}}, padded_documents, batch, gradients_clipped, degree);
  const costmodel::OpTimer timer(cluster_, degree, routed_);

  auto costs = std::make_unique<StrategyCosts>();
  costs->initial_live_bytes = initial_live_bytes(program);
  for (const costmodel::PhaseCost& phase : costmodel::cost_phases(program, timer)) {
    switch (phase.phase) {
      case Phase::embedding_forward:
        costs->embedding_forward = phase.cost;
        break;
      case Phase::layer_forward:
        costs->layer_forward = phase.cost;
        break;
      case Phase::head:
        costs->head = phase.cost;
        break;
      case Phase::layer_backward:
        costs->layer_backward = phase.cost;
        break;
      case Phase::embedding_backward:
        costs->embedding_backward = phase.cost;
        break;
      case Phase::optimizer:
        // A layer's gradients are finalised before the clip and its weights updated after: two
        // phases, one after the other in its cost.
        (phase.layer >= 0 ? costs->layer_optimizer : costs->model_optimizer).then(phase.cost);
        break;
    }
  }
  return *traced_.emplace(key, std::move(costs)).first->second;
}

double model_flops(const ModelSpec& model, const MicroBatch& micro_batch, int64_t batch) {
  const double b = static_cast<double>(batch), s = static_cast<double>(micro_batch.tokens()),
               h = static_cast<double>(model.hidden);
  double squares = 0;  // Σ sᵢ²: attention pairs within each document
  for (const int64_t document : micro_batch.documents)
    squares += static_cast<double>(document) * static_cast<double>(document);
  // Per layer forward: 2·b·s per matmul parameter, and 4·b·sᵢ²·h of attention per document (half of it
  // when causal).
  const double matmul_parameters = static_cast<double>(
      (model.hidden + 2 * model.kv_hidden()) * model.hidden + model.hidden * model.hidden +
      model.mlp_in_rows() * model.hidden + model.ffn_hidden * model.hidden);
  const double layer = 2 * b * s * matmul_parameters + 4 * b * squares * h * (model.causal ? 0.5 : 1.0);
  const double logits = 2 * b * s * h * static_cast<double>(model.vocab);
  return 3 * (static_cast<double>(model.num_layers) * layer + logits);  // backward is twice the forward
}

double model_flops(const ModelSpec& model, int64_t tokens, int64_t batch) {
  return model_flops(model, MicroBatch::sequence(tokens), batch);
}

MicroBatch micro_batch_of(const EstimateRequest& request) {
  return request.documents.empty() ? MicroBatch::sequence(request.tokens) : MicroBatch{request.documents};
}

EstimateRequest checked_request(const hw::ClusterSpec& cluster, EstimateRequest request) {
  if (request.degree == 0) request.degree = cluster.num_gpus();
  for (std::size_t i = 0; i < request.documents.size(); ++i)
    if (request.documents[i] <= 0)
      throw InputError("", 0, "docs",
                       "expected documents of at least one token, got " +
                           std::to_string(request.documents[i]) + " for document " + std::to_string(i + 1));
  if (!request.documents.empty()) {
    const int64_t sum = MicroBatch{request.documents}.tokens();
    PARADYSE_CHECK(request.tokens == 0 || request.tokens == sum,
                   "a request's documents must sum to its tokens");
    request.tokens = sum;
    if (request.documents.size() == 1) request.documents.clear();
  }
  if (request.tokens <= 0 || request.tokens > kMaxSequenceTokens)
    throw InputError("", 0, "seq",
                     "expected a positive sequence length of at most " + max_sequence_tokens_text() +
                         ", got " + std::to_string(request.tokens));
  if (request.batch <= 0)
    throw InputError("", 0, "batch", "expected a positive batch size, got " + std::to_string(request.batch));
  if (request.micro_batches <= 0 || request.micro_batches > kMaxMicroBatches)
    throw InputError("", 0, "micro_batches",
                     "expected between 1 and " + std::to_string(kMaxMicroBatches) + " micro-batches, got " +
                         std::to_string(request.micro_batches));
  if (request.batch > kMaxSequenceTokens / request.tokens)
    throw InputError("", 0, "batch",
                     "expected at most " + max_sequence_tokens_text() +
                         " in a micro-batch (batch × seq), got " + std::to_string(request.batch) + " × " +
                         std::to_string(request.tokens));
  if (request.degree < 1 || request.degree > cluster.num_gpus())
    throw InputError("", 0, "degree",
                     "expected a degree between 1 and the " + std::to_string(cluster.num_gpus()) +
                         " GPUs of " + cluster.name + ", got " + std::to_string(request.degree));
  return request;
}

EstimateRequest checked_request(const ModelSpec& model, const hw::ClusterSpec& cluster, const Plan& plan,
                                EstimateRequest request) {
  request = checked_request(cluster, request);
  if (plan.size() != static_cast<std::size_t>(model.num_layers))
    throw InputError("", 0, "plan",
                     "expected one strategy per layer (" + std::to_string(model.num_layers) + "), got " +
                         std::to_string(plan.size()));
  for (const LayerChoice& layer : plan)
    if (auto why = layer.strategy->unsupported(model, request.degree))
      throw InputError("", 0, "strategy",
                       std::string(layer.strategy->name()) + " cannot run " + model.name + ": " + *why);
  return request;
}

void static_memory(const ModelSpec& model, int degree, MemoryBreakdown& memory, WeightLayout layout) {
  const double p = degree;
  const double h = static_cast<double>(model.hidden);
  const double norms_per_layer = (model.norm == NormKind::layer_norm ? 4 : 2) * h;
  const double matrices_per_layer = static_cast<double>(model.layer_parameters()) - norms_per_layer;
  const double vocab = static_cast<double>(padded_vocab(model, degree));
  const double final_norm = (model.norm == NormKind::layer_norm ? 2 : 1) * h;
  const double tables = vocab * h * (model.tied_embeddings ? 1 : 2);
  const double per_layer = layout == WeightLayout::job
                               ? static_cast<double>(layer_flat_layout(model).padded(degree)) / p
                               : matrices_per_layer / p + norms_per_layer;
  const double parameters = static_cast<double>(model.num_layers) * per_layer + tables / p + final_norm;
  // Megatron-LM's mixed precision, "bf16 parameters, fp32 gradients": 18 bytes per parameter (Megatron
  // Core developer guide, Distributed Optimizer, non-distributed column).
  memory.weights_bytes = 2 * parameters;
  memory.gradients_bytes = 4 * parameters;
  memory.optimizer_states_bytes = 12 * parameters;
}

double static_memory_bytes(const ModelSpec& model, int degree, WeightLayout layout) {
  MemoryBreakdown terms;
  static_memory(model, degree, terms, layout);
  return terms.weights_bytes + terms.gradients_bytes + terms.optimizer_states_bytes;
}

namespace {
MemoryStep memory_step(const costmodel::SegmentCost& segment) {
  return {segment.memory_peak_bytes, segment.memory_delta_bytes};
}
}  // namespace

CostTable Estimator::cost_table(const std::vector<std::pair<const Strategy*, Recompute>>& candidates,
                                const EstimateRequest& request_in) {
  const EstimateRequest request = checked_request(cluster_, request_in);
  CostTable table;
  table.num_layers = static_cast<int>(model_.num_layers);
  table.tokens = request.tokens;
  table.degree = request.degree;
  table.batch = request.batch;
  const MicroBatch micro_batch = micro_batch_of(request);
  const std::vector<int64_t> cost_key = micro_batch.cost_key(request.degree, model_.causal);
  table.padded_tokens = micro_batch.padded_tokens(request.degree, model_.causal);
  for (const auto& [strategy, recompute] : candidates) {
    if (strategy->unsupported(model_, request.degree)) continue;
    const StrategyCosts* found = nullptr;
    try {
      found = &strategy_costs(*strategy, request.degree, cost_key, request.batch, recompute,
                              request.gradients_clipped);
    } catch (const TensorTooLarge&) {
      continue;  // no GPU holds it: not a candidate at this length
    }
    const StrategyCosts& costs = *found;
    Candidate& candidate = table.candidates.emplace_back();
    candidate.strategy = strategy;
    candidate.recompute = recompute;
    candidate.layer.forward_s = costs.layer_forward.seconds;
    candidate.layer.backward_s = costs.layer_backward.seconds;
    candidate.layer.seconds =
        costs.layer_forward.seconds + costs.layer_backward.seconds + costs.layer_optimizer.seconds;
    candidate.layer.forward = memory_step(costs.layer_forward);
    candidate.layer.backward = memory_step(costs.layer_backward);
    candidate.layer.optimizer = memory_step(costs.layer_optimizer);
    if (table.candidates.size() > 1) continue;
    // The rest of the step is the same code for every strategy; take it from the first.
    StepCost& step = table.step;
    step.seconds = costs.embedding_forward.seconds + costs.head.seconds + costs.embedding_backward.seconds +
                   costs.model_optimizer.seconds;
    step.initial_bytes = costs.initial_live_bytes;
    step.embedding_forward = memory_step(costs.embedding_forward);
    step.head = memory_step(costs.head);
    step.embedding_backward = memory_step(costs.embedding_backward);
    step.optimizer = memory_step(costs.model_optimizer);
    step.static_bytes = static_memory_bytes(model_, request.degree);
    step.fragmentation = cluster_.gpu.allocator_fragmentation;
    step.capacity_bytes = cluster_.tensor_capacity_bytes();
  }
  return table;
}

Estimate Estimator::estimate(const Strategy& strategy, const EstimateRequest& request, Recompute recompute) {
  return estimate(uniform_plan(strategy, model_.num_layers, recompute), request);
}

namespace {

// A step's phases in execution order, priced: the embedding and the layers' forwards, the head, the
// layers' and the embedding's backwards, and the optimizer.
struct StepSegments {
  double initial_live_bytes = 0;   // the step's inputs (tokens, targets)
  costmodel::SegmentCost forward;  // embedding and layers
  costmodel::SegmentCost head, backward, optimizer;
  double offloaded_bytes = 0;  // host memory of offloaded activations at their peak
};

// A whole step traced and priced phase by phase: what a plan whose layers cannot be priced alone costs
// (an offloaded layer's copies run under its neighbours' compute).
StepSegments whole_step_segments(const ModelSpec& model, const hw::ClusterSpec& cluster, const Plan& plan,
                                 const std::vector<int64_t>& padded_documents, const EstimateRequest& request,
                                 const std::shared_ptr<const costmodel::RoutedCollectiveTimer>& routed) {
  const Program program =
      traced_step(model, plan, padded_documents, request.batch, request.gradients_clipped, request.degree);
  StepSegments step;
  step.initial_live_bytes = initial_live_bytes(program);
  step.offloaded_bytes = static_cast<double>(host_memory_peak(program).bytes);
  const costmodel::OpTimer timer(cluster, request.degree, routed);
  for (const costmodel::PhaseCost& phase : costmodel::cost_phases(program, timer)) {
    switch (phase.phase) {
      case Phase::embedding_forward:
      case Phase::layer_forward:
        step.forward.then(phase.cost);
        break;
      case Phase::head:
        step.head.then(phase.cost);
        break;
      case Phase::layer_backward:
      case Phase::embedding_backward:
        step.backward.then(phase.cost);
        break;
      case Phase::optimizer:
        step.optimizer.then(phase.cost);
        break;
    }
  }
  return step;
}

}  // namespace

Estimate Estimator::estimate(const Plan& plan, const EstimateRequest& request_in) {
  const EstimateRequest request = checked_request(model_, cluster_, plan, request_in);
  const int p = request.degree;
  // The cache is looked up first and keyed on the request as given: a compare asks for every trained
  // micro-batch of every policy, most of them priced before.
  auto key = std::make_tuple(plan, p, request.tokens, request.documents, request.batch, request.micro_batches,
                             request.gradients_clipped);
  if (auto found = estimates_.find(key); found != estimates_.end()) return found->second;
  const MicroBatch trained = micro_batch_of(request);
  const std::vector<int64_t> cost_key = trained.cost_key(p, model_.causal);
  const int64_t padded = std::accumulate(cost_key.begin(), cost_key.end(), int64_t{0});

  StepSegments step;
  const bool offloads = std::any_of(plan.begin(), plan.end(), [](const LayerChoice& layer) {
    return layer.recompute == Recompute::offload;
  });
  if (offloads) {
    step = whole_step_segments(model_, cluster_, plan, cost_key, request, routed_);
  } else {
    std::vector<const StrategyCosts*> costs;
    for (const LayerChoice& layer : plan)
      costs.push_back(&strategy_costs(*layer.strategy, p, cost_key, request.batch, layer.recompute,
                                      request.gradients_clipped));
    const StrategyCosts& ends = *costs.front();
    step.initial_live_bytes = ends.initial_live_bytes;
    step.forward = ends.embedding_forward;
    for (const StrategyCosts* c : costs) step.forward.then(c->layer_forward);
    step.head = ends.head;
    for (auto c = costs.rbegin(); c != costs.rend(); ++c) step.backward.then((*c)->layer_backward);
    step.backward.then(ends.embedding_backward);
    for (const StrategyCosts* c : costs) step.optimizer.then(c->layer_optimizer);
    step.optimizer.then(ends.model_optimizer);
  }

  // The iteration in execution order; memory folds along it.
  costmodel::SegmentCost forward = step.forward;
  const double saved_activations = forward.memory_delta_bytes;
  forward.then(step.head);
  const costmodel::SegmentCost& backward = step.backward;
  const costmodel::SegmentCost& optimizer = step.optimizer;
  // Gradient accumulation: each micro-batch leaves memory as it found it (its loss adds into one
  // buffer held from the start), so they fold one after another to the same peak.
  costmodel::SegmentCost micro_batch = forward;
  micro_batch.then(backward);
  costmodel::SegmentCost iteration;
  for (int64_t i = 0; i < request.micro_batches; ++i) iteration.then(micro_batch);
  iteration.then(optimizer);
  const auto n = static_cast<double>(request.micro_batches);

  Estimate e;
  e.plan = plan_name(plan);
  e.tokens = request.tokens;
  e.padded_tokens = padded;
  e.documents = static_cast<int64_t>(trained.documents.size());
  e.degree = p;
  e.batch = request.batch;
  e.micro_batches = request.micro_batches;
  e.time.forward_s = n * forward.seconds;
  e.time.backward_s = n * backward.seconds;
  e.time.optimizer_s = optimizer.seconds;
  e.time.total_s = iteration.seconds;
  e.time.compute_s = iteration.compute_s;
  e.time.exposed_communication_s = iteration.exposed_communication_s();
  e.time.host_bound_s = iteration.host_bound_s;

  static_memory(model_, p, e.memory);
  // The traced step holds one micro-batch's tokens and targets; a global batch holds them all.
  StepSpec inputs;
  inputs.tokens = padded;
  inputs.batch = request.batch;
  const double initial_bytes =
      step.initial_live_bytes + (n - 1) * static_cast<double>(micro_batch_input_bytes(inputs, p));
  const double activation_peak = initial_bytes + iteration.memory_peak_bytes;
  e.memory.saved_activations_bytes = initial_bytes + saved_activations;
  e.memory.transient_bytes = activation_peak - e.memory.saved_activations_bytes;
  e.memory.fragmentation_bytes = cluster_.gpu.allocator_fragmentation * activation_peak;
  e.memory.peak_bytes = e.memory.weights_bytes + e.memory.gradients_bytes + e.memory.optimizer_states_bytes +
                        activation_peak + e.memory.fragmentation_bytes;
  e.memory.capacity_bytes = cluster_.tensor_capacity_bytes();
  e.memory.offloaded_bytes = step.offloaded_bytes;
  e.memory.host_capacity_bytes = cluster_.gpu.host_memory_bytes;
  e.fits = cluster_.holds(e.memory.peak_bytes, e.memory.offloaded_bytes);

  e.flops = iteration.flops * p;
  e.model_flops = n * model_flops(model_, trained, request.batch);  // padding is not useful work
  e.mfu = e.model_flops / (e.time.total_s * p * cluster_.gpu.bf16_flops_per_second);
  e.comm_bytes = iteration.bus_bytes;
  return estimates_.emplace(key, e).first->second;
}

}  // namespace paradyse::steps
