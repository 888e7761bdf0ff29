// The paper's Table 5: the paradyse policy in full (on the learned cost model, fitted to profiles of
// every strategy taken first on the same engine), without each strategy, without the learned cost
// model (the analytic one instead) and without γ-smoothing, each over the same trace.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluation/compare.hpp"
#include "evaluation/compare_job.hpp"

namespace paradyse::evaluation {

struct AblationRequest {
  MachineOptions machine;
  PolicyOptions policy;  // the full policy's settings
  CompareJob job;        // trace, order, limit, engine, grid ratio
  std::vector<int64_t> profile_lengths;
  std::string out;  // folder for profile.csv and costmodel.json (the fitted model)
};

struct AblationVariant {
  std::string name;  // "full", "w/o metp", "w/o learned cost model", "w/o smoothing"
  PolicyResult result;
  double relative_to_full_pct = 0;  // total time against the full policy's
};

struct AblationResult {
  std::string model, cluster, trace;
  std::string trained;        // how the trace was prepared
  std::string engine_method;  // how times were obtained
  std::string profile_path, costmodel_path;
  std::vector<AblationVariant> variants;  // "full" first
};

// Profiles, fits and runs every variant; `progress` sees (done, total, variant name).
AblationResult run_ablation(const AblationRequest& request, const Progress& progress = {});

nlohmann::ordered_json ablation_json(const AblationResult& result);
std::string ablation_table(const AblationResult& result);  // Markdown
// ablation.json and ablation.md in `dir`.
void write_ablation_outputs(const AblationResult& result, const std::string& dir);

}  // namespace paradyse::evaluation
