#include "experiments/real_options.hpp"

#include <algorithm>
#include <cstdlib>

#include "common/errors.hpp"
#include "evaluation/options.hpp"
#include "experiments/inputs.hpp"
#include "strategies/micro_batch.hpp"
#include "strategies/training_step.hpp"

namespace paradyse::cli {

void RealRunOptions::add_to(CLI::App& command) {
  command
      .add_option("--ranks", ranks, "processes to run (started here, or by mpirun/srun: their world size)")
      ->check(positive_whole_number())
      ->capture_default_str();
  command
      .add_option("--model", model,
                  "model preset (tiny-gpt and tiny-llama fit a CPU) or a Hugging Face config.json")
      ->capture_default_str();
  add_model_overrides(command, attention, attention_kernel, loss_kernel);
  command.add_option("--plan", plan, "one strategy for every layer, or one per layer, comma-separated")
      ->capture_default_str();
  command.add_option("--layers", layers, "layers to run (default: the model's)")
      ->check(positive_whole_number());
  command
      .add_option("--recompute", recompute,
                  "none, selective, full or offload, for every layer (offload: what each layer but the last "
                  "keeps for its backward waits in host memory, copied on a stream of its own on a GPU)")
      ->capture_default_str();
  seq_option = command.add_option("--seq", seq, "tokens per sequence, comma-separated (16K = 16384)")
                   ->capture_default_str();
  add_documents_option(command, docs);
  command.add_option("--batch", batch, "sequences per step")
      ->check(positive_whole_number())
      ->capture_default_str();
  // A million steps of the smallest model take hours; more is a typo, whose count would overflow.
  constexpr int64_t kMaxSteps = 1'000'000;
  command.add_option("--steps", steps, "measured steps per length (the median is reported)")
      ->check(positive_whole_number(kMaxSteps))
      ->capture_default_str();
  command.add_option("--warmup", warmup, "unmeasured steps first, per length")
      ->check(whole_number_in(0, kMaxSteps))
      ->capture_default_str();
  command
      .add_option("--device", device,
                  "cpu (Gloo) or cuda (NCCL, one rank per GPU, ranks mapped to GPUs by local rank; needs a "
                  "CUDA LibTorch)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  command.add_flag("--gloo-on-device", gloo_on_device,
                   "with --device cuda: ranks talk through Gloo, staging CUDA tensors through pinned host "
                   "memory, so that several may share one GPU (for numerics; slow)");
  command
      .add_option(
          "--dtype", dtype,
          "bf16: bf16 activations and weights, as the simulator counts bytes; fp32: float32 throughout")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  command.add_option("--timeout", timeout_s, "seconds a rank waits for a peer before failing")
      ->check(positive_whole_number())
      ->capture_default_str();
}

ModelSpec RealRunOptions::load_model() const {
  ModelSpec spec =
      paradyse::load_model(model, evaluation::model_overrides(attention, attention_kernel, loss_kernel));
  if (layers > 0) spec.num_layers = layers;  // 0: not given
  return spec;
}

real::RunRequest RealRunOptions::request(const ModelSpec& spec) const {
  real::RunRequest r;
  r.model = &spec;
  r.plan = evaluation::parse_plan(plan, spec, evaluation::parse_recompute_flag(recompute));
  for (const LayerChoice& choice : r.plan)
    if (auto reason = choice.strategy->unsupported(spec, ranks))
      throw InputError("--ranks", 0, "",
                       std::string(choice.strategy->name()) + " cannot run " + spec.name + " on " +
                           std::to_string(ranks) + " ranks: " + *reason);
  // --seq has a default: it counts as given with --docs only when it was given.
  const bool seq_given = docs.empty() || (seq_option != nullptr && seq_option->count() > 0);
  const std::vector<MicroBatch> micro_batches = parse_micro_batches(seq_given ? seq : "", docs);
  if (!docs.empty()) {  // a packed micro-batch: each document padded, as the layout needs
    r.documents = micro_batches.front().padded_documents(ranks, spec.causal);
    r.lengths = {MicroBatch{r.documents}.tokens()};
    if (r.documents.size() == 1) r.documents.clear();
  } else {
    for (const MicroBatch& sequence : micro_batches) r.lengths.push_back(sequence.tokens());
  }
  for (int64_t length : r.lengths) {
    const int64_t multiple = SequenceLayout::required_multiple(ranks, spec.causal);
    if (length % multiple != 0)
      throw InputError(
          "--seq", 0, "",
          "expected lengths that " + std::to_string(ranks) + " ranks can split: multiples of " +
              std::to_string(multiple) +
              (spec.causal ? " (2 x ranks: causal models give each rank two zig-zag chunks)" : "") +
              ", got " + std::to_string(length) + " (the next is " +
              std::to_string(SequenceLayout::padded_length(length, ranks, spec.causal)) + ")");
  }
  r.batch = batch;
  r.steps = steps;
  r.warmup_steps = warmup;
  r.cuda = device == "cuda";
  if (gloo_on_device && !r.cuda) throw InputError("--gloo-on-device", 0, "", "expected with --device cuda");
  r.gloo_on_device = gloo_on_device;
  // Under mpirun, srun or torchrun each rank checks its own GPU when it connects.
  const int local_ranks = real::rank_from_environment() ? 1 : ranks;
  if (auto reason = real::device_unavailable(r.cuda, local_ranks, gloo_on_device))
    throw InputError("--device", 0, "", *reason);
  r.mixed_precision = dtype == "bf16";
  r.timeout = std::chrono::seconds(timeout_s);
  return r;
}

void on_every_rank(int ranks, int timeout_s, const std::function<void(const real::RankEnvironment&)>& body) {
  if (const auto env = real::rank_from_environment()) {
    if (env->size != ranks)
      throw InputError("--ranks", 0, "",
                       "expected the world size of the job that started this process (" + env->launcher +
                           ": " + std::to_string(env->size) + "), got " + std::to_string(ranks));
    body(*env);
    return;
  }
  // A rank that fails notices within its timeout at worst; mostly at once, when a connection drops.
  std::exit(real::launch_local_ranks(ranks, std::chrono::seconds(timeout_s) + std::chrono::seconds(10)));
}

}  // namespace paradyse::cli
