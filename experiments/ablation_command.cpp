// The paper's Table 5: the paradyse policy in full (on the learned cost model, fitted to simulated
// profiles here), without each strategy, without the learned cost model (the analytic one instead),
// and without γ-smoothing, each over the same trace on the same engine.
#include "experiments/ablation_command.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "costmodel/learned_model.hpp"
#include "experiments/compare_job.hpp"
#include "experiments/profiling.hpp"
#include "experiments/progress_bar.hpp"

namespace paradyse::cli {
namespace {

struct AblationOptions {
  MachineOptions machine;
  PolicyOptions policy;
  CompareJob job;  // trace, order, limit, engine, grid ratio
  std::string profile_lengths = "1K,2K,3K,4K,6K,8K,12K,16K,24K,32K,48K,64K";
  std::string out = "out/ablation";
  bool json = false;
};

struct Variant {
  std::string name;
  PolicyOptions options;
};

void run(const AblationOptions& options) {
  const std::vector<int64_t> profile_lengths = parse_lengths(options.profile_lengths, "--profile-seq");
  check_engine(options.job.engine);
  const JobTrace run = load_job_trace(options.job);
  const traces::Trace& trace = run.trace;
  const traces::PreparedTrace& prepared = run.prepared;
  PolicySet base = options.policy.build(options.machine);
  std::filesystem::create_directories(options.out);

  StepEngine engine(base.model, base.cluster, base.degree, options.job.engine, options.job.grid_ratio);
  const costmodel::Profile profile = profile_uniform_plans(engine.estimator(), engine.simulator(),
                                                           base.degree, 1, all_strategies(), profile_lengths);
  const std::string profile_path = options.out + "/profile.csv", model_path = options.out + "/costmodel.json";
  costmodel::write_profile(profile, profile_path);
  costmodel::LearnedModel::fit(profile).save(model_path);

  std::vector<Variant> variants;
  PolicyOptions full = options.policy;
  full.policies = "paradyse";
  full.costmodel = model_path;
  variants.push_back({"full", full});
  for (const Strategy* strategy : all_strategies()) {
    if (strategy->unsupported(base.model, base.degree)) continue;
    PolicyOptions without = full;
    without.exclude = strategy->name();
    variants.push_back({"w/o " + std::string(strategy->name()), without});
  }
  PolicyOptions analytic = full;
  analytic.costmodel = "analytic";
  variants.push_back({"w/o learned cost model", analytic});
  PolicyOptions smooth = full;
  smooth.gamma = 0;
  variants.push_back({"w/o smoothing", smooth});

  ProgressBar bar(isatty(STDERR_FILENO) != 0);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  double full_seconds = 0;
  std::string table = fmt::format(
      "| variant | total time | vs full | trained | out of memory | longest before OOM | "
      "switches |\n|---|---|---|---|---|---|---|\n");
  for (std::size_t v = 0; v < variants.size(); ++v) {
    PolicySet set = variants[v].options.build(options.machine);
    const CompareResult result = run_compare(
        {set.policies.front().get()}, prepared.lengths, engine,
        [&](int64_t done, int64_t total, const std::string&) {
          bar.update(static_cast<int64_t>(v) * total + done, static_cast<int64_t>(variants.size()) * total,
                     variants[v].name);
        },
        0);
    const PolicyResult& p = result.policies.front();
    if (v == 0) full_seconds = p.total_seconds;
    const double relative = full_seconds > 0 ? 100 * (p.total_seconds / full_seconds - 1) : 0;
    rows.push_back({{"variant", variants[v].name},
                    {"total_time_s", p.total_seconds},
                    {"relative_to_full_pct", relative},
                    {"trained", p.trained},
                    {"oom_count", p.oom_count},
                    {"max_len_before_oom", p.max_len_before_oom},
                    {"switches", p.plan_switches}});
    table += fmt::format("| {} | {:.2f} h | {:+.1f} % | {} | {} | {} | {} |\n", variants[v].name,
                         p.total_seconds / 3600, relative, p.trained, p.oom_count, p.max_len_before_oom,
                         p.plan_switches);
  }
  bar.finish();
  nlohmann::ordered_json out = {{"model", base.model.name},  {"cluster", base.cluster.name},
                                {"trace", trace.name},       {"trained", prepared.description},
                                {"engine", engine.method()}, {"profile", profile_path},
                                {"costmodel", model_path},   {"variants", rows}};
  std::ofstream(options.out + "/ablation.json") << out.dump(2) << "\n";
  std::ofstream(options.out + "/ablation.md") << fmt::format(
      "# Ablation of the paradyse policy: {} on {}, trace {}\n\n{}\n\nTimes: {}.\n\n{}", base.model.name,
      base.cluster.name, trace.name, prepared.description, engine.method(), table);
  if (options.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("ablation of paradyse: {} on {}, trace {} ({})\n{}", base.model.name, base.cluster.name,
             trace.name, prepared.description, table);
  fmt::print("wrote {0}/ablation.json, {0}/ablation.md, the profile and the fitted cost model\n",
             options.out);
}

}  // namespace

void add_ablation_command(CLI::App& app) {
  auto options = std::make_shared<AblationOptions>();
  options->job.order = "sorted";  // the paper's setting
  CLI::App* command = app.add_subcommand(
      "ablation",
      "The paper's Table 5: paradyse in full (learned cost model fitted to simulated profiles), without each "
      "strategy, without the learned cost model, without smoothing, over one trace; total time of each "
      "against "
      "the full policy.");
  options->machine.add_to(*command);
  command->add_option("--trace", options->job.trace, "bundled trace or file")->capture_default_str();
  command->add_option("--order", options->job.order, "dataset, sorted or shuffled")->capture_default_str();
  command->add_option("--limit", options->job.limit, "train only the first N sequences (0: all)")
      ->capture_default_str();
  command->add_option("--engine", options->job.engine, "sim or analytic")->capture_default_str();
  command->add_option("--grid-ratio", options->job.grid_ratio, "sim: length grid ratio (see compare)")
      ->capture_default_str();
  command
      ->add_option("--profile-seq", options->profile_lengths,
                   "lengths profiled to fit the learned cost model")
      ->capture_default_str();
  command->add_option("--out", options->out, "folder for the profile, cost model and table")
      ->capture_default_str();
  command->add_flag("--json", options->json, "print JSON instead of the table");
  command->callback([options] { run(*options); });
}

}  // namespace paradyse::cli
