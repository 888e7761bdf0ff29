// paradyse ablation: the paper's Table 5 (evaluation/ablation.hpp).
#include "experiments/ablation_command.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <iostream>

#include "common/output_lock.hpp"
#include "evaluation/ablation.hpp"
#include "experiments/command_table.hpp"
#include "experiments/inputs.hpp"
#include "experiments/progress_bar.hpp"

namespace paradyse::cli {
namespace {

struct AblationOptions {
  evaluation::AblationRequest request;
  std::string profile_lengths = "1K,2K,3K,4K,6K,8K,12K,16K,24K,32K,48K,64K";
  bool json = false;
};

void run(AblationOptions options) {
  options.request.profile_lengths = evaluation::parse_lengths(options.profile_lengths, "--profile-seq");
  const OutputLock lock(options.request.out, "--out");  // one run at a time into a folder
  ProgressBar bar(isatty(STDERR_FILENO) != 0);
  const evaluation::AblationResult result = evaluation::run_ablation(
      options.request,
      [&](int64_t done, int64_t total, const std::string& what) { bar.update(done, total, what); });
  bar.finish();
  evaluation::write_ablation_outputs(result, options.request.out);
  if (options.json) {
    std::cout << evaluation::ablation_json(result).dump(2) << "\n";
    return;
  }
  fmt::print("ablation of paradyse: {} on {}, trace {} ({})\n{}", result.model, result.cluster, result.trace,
             result.trained, evaluation::ablation_table(result));
  fmt::print("wrote {0}/ablation.json, {0}/ablation.md, the profile and the fitted cost model\n",
             options.request.out);
}

}  // namespace

void add_ablation_command(CLI::App& app) {
  auto options = std::make_shared<AblationOptions>();
  options->request.out = "out/ablation";
  options->request.job.order = "sorted";  // the paper's setting
  CLI::App* command = app.add_subcommand("ablation", command_description("ablation"));
  add_machine_options(*command, options->request.machine);
  command->add_option("--trace", options->request.job.trace, "bundled trace or file")->capture_default_str();
  command->add_option("--order", options->request.job.order, "dataset, sorted or shuffled")
      ->capture_default_str();
  command->add_option("--limit", options->request.job.limit, "train only the first N sequences (0: all)")
      ->capture_default_str();
  command->add_option("--engine", options->request.job.engine, "sim or analytic")->capture_default_str();
  command->add_option("--grid-ratio", options->request.job.grid_ratio, "sim: length grid ratio (see compare)")
      ->capture_default_str();
  command
      ->add_option("--profile-seq", options->profile_lengths,
                   "lengths profiled to fit the learned cost model")
      ->capture_default_str();
  command->add_option("--out", options->request.out, "folder for the profile, cost model and table")
      ->capture_default_str();
  command->add_flag("--json", options->json, "print JSON instead of the table");
  command->callback([options] { run(*options); });
}

}  // namespace paradyse::cli
