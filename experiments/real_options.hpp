// The options `paradyse run` and `paradyse validate` share: what to run for real and on how many
// ranks, checked in the launching process before any rank starts.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "real_backend/real_run.hpp"

namespace paradyse::cli {

struct RealRunOptions {
  int ranks = 2;
  std::string model = "tiny-gpt";
  std::string attention;         // "", "causal" or "bidirectional"
  std::string attention_kernel;  // "", "flash" or "unfused"
  std::string loss_kernel;       // "", "fused" or "unfused"
  std::string plan = "megatron_ts";
  int layers = 0;  // 0: the model's
  std::string recompute = "none";
  std::string seq = "1024";
  std::string docs;  // a packed micro-batch instead of --seq: its documents' tokens
  CLI::Option* seq_option = nullptr;
  int64_t batch = 1;
  int steps = 3;
  int warmup = 1;
  std::string device = "cpu";
  bool gloo_on_device = false;
  std::string dtype = "bf16";
  int timeout_s = 120;

  void add_to(CLI::App& command);
  // The model with `layers` layers, as the plan runs it.
  ModelSpec load_model() const;
  // Everything checked: model, plan, lengths, ranks against heads and lengths, the device.
  real::RunRequest request(const ModelSpec& model) const;
};

// Runs `body` on this process's rank when it is one (started by `on_every_rank` itself, or by
// mpirun/srun/torchrun, whose world size must then be `ranks`); otherwise starts `ranks` copies of
// this command and exits with their status.
void on_every_rank(int ranks, int timeout_s, const std::function<void(const real::RankEnvironment&)>& body);

}  // namespace paradyse::cli
