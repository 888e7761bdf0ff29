#include "experiments/calibrate_command.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/atomic_file.hpp"
#include "common/errors.hpp"
#include "evaluation/options.hpp"
#include "experiments/command_table.hpp"
#include "experiments/inputs.hpp"
#include "experiments/real_options.hpp"
#include "hw_models/cluster.hpp"

namespace paradyse::cli {
namespace {

struct CalibrateOptions {
  int ranks = 2;
  std::string model = "tiny-gpt";
  std::string dtype = "bf16";
  std::string device = "cpu";
  std::string out;  // default: local-cpu.json or local-cuda.json
  std::string max_seq = "2048";
  std::string max_bytes = "64M";
  int passes = 3;
  bool any_speed = false;
  int timeout_s = 120;
};

void calibrate(CalibrateOptions options) {
  const bool cuda = options.device == "cuda";
  if (options.out.empty()) options.out = cuda ? "local-cuda.json" : "local-cpu.json";
  check_output_path(options.out, OutputKind::file, "--out");
  const int local_ranks = real::rank_from_environment() ? 1 : options.ranks;
  if (auto reason = real::device_unavailable(cuda, local_ranks, /*gloo_on_device=*/false))
    throw InputError("--device", 0, "", *reason);
  const ModelSpec model = load_model(options.model);
  real::CalibrationOptions calibration;
  calibration.precision = options.dtype == "bf16" ? real::Precision::mixed : real::Precision::fp32;
  calibration.max_attention_tokens = evaluation::parse_length(options.max_seq, "--max-seq");
  calibration.max_collective_bytes = evaluation::parse_bytes(options.max_bytes, "--max-bytes", 1024);
  calibration.passes = options.passes;
  calibration.any_speed = options.any_speed;
  calibration.note = [](const std::string& note) { fmt::print(stderr, "calibrate: {}\n", note); };
  on_every_rank(options.ranks, options.timeout_s, [&](const real::RankEnvironment& env) {
    const auto json =
        real::calibrate_on_rank(env, model, cuda, calibration, std::chrono::seconds(options.timeout_s));
    if (!json) return;
    write_file_atomically(options.out, [&](std::ostream& out) { out << *json << "\n"; });
    hw::ClusterSpec cluster;
    try {
      cluster = hw::load_cluster(options.out);  // what validate will read
    } catch (const InputError& e) {             // a figure outside the schema: calibrate's own bug
      std::filesystem::remove(options.out);
      throw InternalError(std::string("calibrate wrote a cluster file that paradyse refuses: ") + e.what());
    }
    fmt::print("wrote {}: {} ranks, GEMM peak {:.1f} GFLOP/s, copy {:.1f} GB/s, all-reduce bus {:.2f} GB/s\n",
               options.out, cluster.gpus_per_node, cluster.gpu.bf16_flops_per_second / 1e9,
               cluster.gpu.hbm_bytes_per_second / 1e9, cluster.intra_node.peak_bus_bandwidth() / 1e9);
  });
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto options = std::make_shared<CalibrateOptions>();
  CLI::App* command = app.add_subcommand("calibrate", command_description("calibrate"));
  command->add_option("--ranks", options->ranks, "processes to measure with (as validate will run)")
      ->check(positive_whole_number())
      ->capture_default_str();
  command->add_option("--model", options->model, "model whose head size attention is timed at")
      ->capture_default_str();
  command->add_option("--dtype", options->dtype, "element type GEMMs and attention are timed in")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  command
      ->add_option("--device", options->device,
                   "cpu (Gloo) or cuda: measure this machine's GPUs, one rank per GPU over NCCL (needs a "
                   "CUDA LibTorch)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  command->add_option("--out", options->out,
                      "cluster file to write (default: local-cpu.json, local-cuda.json)");
  command
      ->add_option("--max-seq", options->max_seq,
                   "longest sequence attention is timed at (128, 256, ... up to it): the longest "
                   "you will validate, since longer ones are priced at its rate")
      ->capture_default_str();
  command
      ->add_option("--max-bytes", options->max_bytes,
                   "largest collective timed (1K, 4K, 16K, ... up to it; 64K, 64M, 1G: multiples of "
                   "1024): the largest a step you will validate issues, since larger ones are priced at "
                   "its bandwidth")
      ->capture_default_str();
  command
      ->add_option("--passes", options->passes,
                   "samples of each figure, each taken at the machine's own speed: a speed reference is "
                   "timed around every group of figures, and a group's pass counts when the machine ran "
                   "within 10 % of its own speed (the speed it ran at most during the calibration); "
                   "passes go on, up to 3 x --passes, until every group has --passes, so that the model "
                   "describes one speed of a shared machine, not a mix")
      ->check(positive_whole_number())
      ->capture_default_str();
  command->add_flag("--any-speed", options->any_speed,
                    "count every pass whatever the machine's speed: exactly --passes passes, each figure "
                    "their median (for a dedicated machine, or a quick look)");
  command->add_option("--timeout", options->timeout_s, "seconds a rank waits for a peer")
      ->check(positive_whole_number())
      ->capture_default_str();
  command->callback([options] { calibrate(*options); });
}

}  // namespace paradyse::cli
