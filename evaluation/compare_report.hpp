// What a compare run leaves behind, in one folder: summary.json (per policy: total time, tokens/s,
// MFU, out-of-memory count, longest sequence before the first, plan switches), per_sequence.csv (every
// policy × sequence: plan, predicted and engine time and memory; compressed, or left out),
// cumulative_time.png (the paper's Figure 2: cumulative training time against sequence length, a curve ending
// at its policy's first out of memory), time_by_length.png (time per step against length) and report.md (the
// tables, how each policy compares with the others on the sequences both trained, the pictures). Plots are
// drawn by gnuplot.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluation/compare.hpp"
#include "evaluation/per_sequence_file.hpp"

namespace paradyse::evaluation {

struct RunDescription {
  std::string model;
  std::string cluster;
  // The framework that issues the calls ("": the cluster file's own host block, or none), and the
  // fused attention kernel ("": the GPU's own curves).
  std::string framework = "";
  std::string attention_implementation = "";
  int degree = 0;
  int64_t global_batch = 1;  // sequences a step
  // Packed training: tokens a step and padded tokens a micro-batch (0: not packed).
  int64_t global_batch_tokens = 0;
  int64_t micro_batch_tokens = 0;
  int shard_degree = 0;  // group policies: the GPUs each weight is sharded over (0: no group policies)
  std::string gradient_reduce_dtype = "";  // group policies: bf16 or fp32 ("": no group policies)
  std::string trace;                       // name or path
  std::string trace_about;                 // where it comes from
  std::string preparation;                 // order, cap rule, limit: what was trained
  bool sorted = false;  // cumulative time is drawn against length when sorted, else against position
  double wall_s = 0;
};

// What summary.json says of the run: not `sorted` (it only shapes a plot) nor the wall time (which
// would make two identical runs' summaries differ).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RunDescription, model, cluster, framework, attention_implementation,
                                   degree, global_batch, global_batch_tokens, micro_batch_tokens,
                                   shard_degree, gradient_reduce_dtype, trace, trace_about, preparation)

// "one sequence per training step", how many a global batch holds, or how it is packed.
std::string steps_text(const RunDescription& run);
// What the group policies shard their weights over ("" without group policies).
std::string shard_group_text(const RunDescription& run);

// A policy's totals: "total_time_s", "tokens_per_s", "mfu", "oom_count" and "oom_tokens" (micro-batches
// out of memory and their tokens), "max_len_before_oom", "switches" (plan switches), "steps" (optimizer
// steps), "trained" and "micro_batches" (how many; also as "sequences"), not each micro-batch.
void to_json(nlohmann::json& j, const PolicyResult& policy);
// The engine and how times were obtained, the interpolation error when there is one, and every
// policy's totals under "policies", by policy name.
void to_json(nlohmann::json& j, const CompareResult& result);
struct Speedup;
// "policy", "baseline", "baseline_role", "tokens_per_s_ratio", "speedup_on_common_steps", "common_steps".
void to_json(nlohmann::json& j, const Speedup& speedup);

// summary.json: the run and the result.
nlohmann::json summary_json(const CompareResult& result, const RunDescription& run);
// The per-policy table printed on the terminal and in the report.
std::string summary_table(const CompareResult& result);
// The folder of a compare run's files, written as the run goes: checked and opened as dir + ".partial"
// before the run (InputError naming --out when `dir` holds anything but a compare run's files), the
// per-sequence rows written into it as they come (sink()), the rest by finish(), which replaces an
// earlier run's files in `dir` with it. Dropped before finish(), it leaves nothing behind.
class CompareOutputs {
 public:
  explicit CompareOutputs(const std::string& dir, PerSequenceFormat per_sequence = PerSequenceFormat::csv);
  ~CompareOutputs();
  CompareOutputs(const CompareOutputs&) = delete;
  CompareOutputs& operator=(const CompareOutputs&) = delete;
  SequenceSink& sink();
  void finish(const CompareResult& result, const RunDescription& run);

 private:
  std::filesystem::path dir_, partial_;
  std::unique_ptr<PerSequenceFile> per_sequence_;
  bool finished_ = false;
};

// Seconds `a` took over the steps both `a` and `b` (policies of `result`) trained whole (every
// micro-batch in memory), and seconds `b` took over them: policies that split a step differently
// (group policies) compare too.
std::pair<double, double> common_time_s(const CompareResult& result, const PolicyResult& a,
                                        const PolicyResult& b);

// The static policy that trains the most micro-batches, then in the least time; null when none trains
// any.
const PolicyResult* best_static(const CompareResult& result);

// A policy against a baseline: tokens/s over the baseline's, and the baseline's time over its own on
// the steps both trained whole (policies that leave different sequences out of memory compare fairly
// there).
struct Speedup {
  std::string policy, baseline;
  std::string role;  // what the baseline is ("the fastest static", ...), or none
  double tokens_per_s_ratio = 0;
  double common_speedup = 0;
  int64_t common_steps = 0;
};
Speedup speedup(const CompareResult& result, const PolicyResult& policy, const PolicyResult& baseline,
                std::string role);
// "groups over static:ulysses_z (the fastest static): 1.20x tokens/s, 1.31x on the 340 steps both
// train whole", a line each.
std::string speedups_text(const std::vector<Speedup>& speedups);
// The static policy (at the run's budget) with the most tokens/s; null when there is none.
const PolicyResult* fastest_static(const CompareResult& result);

// The best group policy (the most tokens trained, then the least time; flexsp only when it is the one
// group policy) against the fastest static policy (the most tokens/s), the static policy that trains
// the most (best_static), and flexsp, where the run has them: statics that leave long sequences out
// of memory have the most tokens/s, so each comparison says something the others do not.
std::vector<Speedup> group_speedups(const CompareResult& result);
std::string group_speedups_text(const CompareResult& result);

}  // namespace paradyse::evaluation
