#include "evaluation/ablation.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <set>

#include "common/atomic_file.hpp"
#include "evaluation/profiling.hpp"
#include "steps/learned_model.hpp"

namespace paradyse::evaluation {
namespace {

struct Variant {
  std::string name;
  PolicyOptions options;
};

std::vector<Variant> variants(const PolicyOptions& full, const ModelSpec& model, int degree) {
  std::vector<Variant> out{{"full", full}};
  for (const Strategy* strategy : paper_strategies()) {
    if (strategy->unsupported(model, degree)) continue;
    PolicyOptions without = full;
    without.exclude = strategy->name();
    out.push_back({"w/o " + std::string(strategy->name()), without});
  }
  PolicyOptions analytic = full;
  analytic.costmodel = "analytic";
  out.push_back({"w/o learned cost model", analytic});
  PolicyOptions smooth = full;
  smooth.gamma = 0;
  out.push_back({"w/o smoothing", smooth});
  return out;
}

}  // namespace

AblationResult run_ablation(const AblationRequest& request, const Progress& progress) {
  check_engine(request.job.engine);
  const std::set<int64_t> distinct(request.profile_lengths.begin(), request.profile_lengths.end());
  if (distinct.size() < steps::kMinProfiledLengths)
    throw InputError("--profile-seq", 0, "",
                     "expected at least " + std::to_string(steps::kMinProfiledLengths) +
                         " distinct lengths to fit the learned cost model to, got " +
                         std::to_string(distinct.size()));
  const JobTrace run = load_job_trace(request.job);
  const PolicySet base = request.policy.build(request.machine);
  std::filesystem::create_directories(request.out);
  // The profile and the fitted model are written first, for the variants to load; a run that fails
  // after them takes them away again.
  struct RemoveUnlessKept {
    std::vector<std::string> paths;
    bool keep = false;
    ~RemoveUnlessKept() {
      std::error_code ignored;
      if (!keep)
        for (const std::string& path : paths) std::filesystem::remove(path, ignored);
    }
  } written;

  StepEngine engine(base.model, base.cluster, base.degree, request.job.engine, request.job.grid_ratio);
  AblationResult result{base.model.name,
                        base.cluster.name,
                        run.trace->name(),
                        run.prepared->description(),
                        engine.method(),
                        request.out + "/profile.csv",
                        request.out + "/costmodel.json",
                        {}};
  const steps::Profile profile = profile_uniform_plans(engine.estimator(), engine.simulator(), base.degree, 1,
                                                       paper_strategies(), request.profile_lengths);
  written.paths = {result.profile_path, result.costmodel_path};
  steps::write_profile(profile, result.profile_path);
  steps::LearnedModel::fit(profile).save(result.costmodel_path);

  PolicyOptions full = request.policy;
  full.policies = "paradyse";
  full.costmodel = result.costmodel_path;
  const std::vector<Variant> all = variants(full, base.model, base.degree);
  const traces::TrainingSchedule steps = traces::unpacked_steps(run.prepared->lengths(), 1);
  for (std::size_t v = 0; v < all.size(); ++v) {
    PolicySet set = all[v].options.build(request.machine);
    const auto variant_progress = [&](int64_t done, int64_t total, const std::string&) {
      if (progress)
        progress(static_cast<int64_t>(v) * total + done, static_cast<int64_t>(all.size()) * total,
                 all[v].name);
    };
    CompareResult compared = run_compare({set.policies.front().get()}, steps, engine, variant_progress, 0);
    AblationVariant& variant = result.variants.emplace_back();
    variant.name = all[v].name;
    variant.result = std::move(compared.policies.front());
    const double full_s = result.variants.front().result.total_s;
    variant.relative_to_full_pct = full_s > 0 ? 100 * (variant.result.total_s / full_s - 1) : 0;
  }
  written.keep = true;
  return result;
}

nlohmann::ordered_json ablation_json(const AblationResult& result) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const AblationVariant& v : result.variants)
    rows.push_back({{"variant", v.name},
                    {"total_time_s", v.result.total_s},
                    {"relative_to_full_pct", v.relative_to_full_pct},
                    {"trained", v.result.trained},
                    {"oom_count", v.result.oom_count},
                    {"max_len_before_oom", v.result.max_len_before_oom},
                    {"switches", v.result.plan_switches}});
  return {{"model", result.model},
          {"cluster", result.cluster},
          {"trace", result.trace},
          {"trained", result.trained},
          {"engine", result.engine_method},
          {"profile", result.profile_path},
          {"costmodel", result.costmodel_path},
          {"variants", rows}};
}

std::string ablation_table(const AblationResult& result) {
  std::string table =
      "| variant | total time | vs full | trained | out of memory | longest before OOM | switches |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const AblationVariant& v : result.variants)
    table += fmt::format("| {} | {:.2f} h | {:+.1f} % | {} | {} | {} | {} |\n", v.name,
                         v.result.total_s / 3600, v.relative_to_full_pct, v.result.trained,
                         v.result.oom_count, v.result.max_len_before_oom, v.result.plan_switches);
  return table;
}

void write_ablation_outputs(const AblationResult& result, const std::string& dir) {
  write_file_atomically(dir + "/ablation.json",
                        [&](std::ostream& out) { out << ablation_json(result).dump(2) << "\n"; });
  write_file_atomically(dir + "/ablation.md", [&](std::ostream& out) {
    out << fmt::format("# Ablation of the paradyse policy: {} on {}, trace {}\n\n{}\n\nTimes: {}.\n\n{}",
                       result.model, result.cluster, result.trace, result.trained, result.engine_method,
                       ablation_table(result));
  });
}

}  // namespace paradyse::evaluation
