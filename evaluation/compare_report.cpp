#include "evaluation/compare_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "common/errors.hpp"
#include "evaluation/gnuplot.hpp"
#include "evaluation/tuned_statics.hpp"

namespace paradyse::evaluation {

namespace fs = std::filesystem;

namespace {

constexpr const char* kOutputs[] = {"summary.json",        "per_sequence.csv",   "per_sequence.csv.gz",
                                    "cumulative_time.png", "time_by_length.png", "report.md"};

std::string hours(double seconds) {
  return fmt::format("{:.2f} h", seconds / 3600);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out.flush()) throw InputError(path.string(), 0, "", "cannot write");
}

std::string data_rows(const std::vector<std::pair<double, double>>& points) {
  std::string text;
  for (auto [x, y] : points) text += fmt::format("{} {}\n", x, y);
  return text;
}

// Lengths in binary units: 1K = 1024 tokens, every factor of 4.
std::string length_tics() {
  std::string tics = "set xtics (";
  for (int64_t x = 1, i = 0; x <= int64_t{1} << 26; x *= 4, ++i) {
    const std::string label = x >= (1 << 20) ? fmt::format("{}M", x >> 20)
                              : x >= 1024    ? fmt::format("{}K", x >> 10)
                                             : std::to_string(x);
    tics += fmt::format("{}'{}' {}", i == 0 ? "" : ", ", label, x);
  }
  return tics + ")";
}

void plot(const CompareResult& result, const RunDescription& run, const fs::path& dir) {
  const std::string title =
      fmt::format("{} on {} (degree {}), trace {}", run.model, run.cluster, run.degree, run.trace);
  gnuplot::Plot cumulative{
      .png = dir / "cumulative_time.png",
      .settings = {"set key left top", "set grid", "set title " + gnuplot::quoted(title)}};
  if (run.sorted) {
    cumulative.settings.insert(cumulative.settings.end(),
                               {"set logscale x 2", length_tics(),
                                "set xlabel 'sequence length (tokens), sequences sorted short to long'"});
  } else {
    cumulative.settings.push_back("set xlabel 'sequences trained, in run order'");
  }
  cumulative.settings.push_back("set ylabel 'cumulative training time (hours)'");
  gnuplot::Plot by_length{.png = dir / "time_by_length.png",
                          .settings = {"unset logscale", "set logscale xy", length_tics(),
                                       "set xlabel 'sequence length (tokens, padded)'",
                                       "set ylabel 'time of one training step (s)'"}};
  std::vector<gnuplot::Series> static_curves, static_times;
  for (const PolicyResult& p : result.policies) {
    if (is_budget_variant(p)) continue;  // the plots are the run's budget's
    std::vector<std::pair<double, double>> curve, times;
    for (const PolicyCurves::Point& point : p.curves.cumulative)
      curve.emplace_back(static_cast<double>(run.sorted ? point.tokens : point.position),
                         point.seconds / 3600);
    for (const auto& [tokens, seconds] : p.curves.step_by_length)
      times.emplace_back(static_cast<double>(tokens), seconds);
    // Static policies dashed and drawn last, so that one that coincides with paradyse stays visible.
    const bool dashed = is_static(p);
    const std::string style = dashed ? "with lines dt 2 lw 2" : "with lines dt 1 lw 3";
    (dashed ? static_curves : cumulative.series).push_back({data_rows(curve), "1:2", style, p.policy});
    (dashed ? static_times : by_length.series).push_back({data_rows(times), "1:2", style, p.policy});
  }
  cumulative.series.insert(cumulative.series.end(), static_curves.begin(), static_curves.end());
  by_length.series.insert(by_length.series.end(), static_times.begin(), static_times.end());
  gnuplot::draw({cumulative, by_length}, dir / "plot-data");
}

// The run's own policies (not those run again at other budgets), each against each other.
std::string comparisons(const CompareResult& result) {
  std::vector<const PolicyResult*> policies;
  for (const PolicyResult& p : result.policies)
    if (!is_budget_variant(p)) policies.push_back(&p);
  std::string text = "| policy | ";
  for (const PolicyResult* p : policies) text += "vs " + p->policy + " | ";
  text += "\n|---|";
  for (std::size_t i = 0; i < policies.size(); ++i) text += "---|";
  text += "\n";
  for (const PolicyResult* a : policies) {
    text += "| " + a->policy + " | ";
    for (const PolicyResult* b : policies) {
      if (a == b) {
        text += "— | ";
        continue;
      }
      const auto [ta, tb] = common_time_s(result, *a, *b);
      text += tb > 0 ? fmt::format("{:+.1f} % | ", 100 * (ta / tb - 1)) : "n/a | ";
    }
    text += "\n";
  }
  return text;
}

}  // namespace

namespace {

bool is_group_policy(const PolicyResult& p) {
  return p.rounds > 0 || p.group_micro_batches > 0;
}

}  // namespace

std::pair<double, double> common_time_s(const CompareResult& result, const PolicyResult& a,
                                        const PolicyResult& b) {
  const CommonSteps common = result.common_steps(a, b);
  return {common.a_s, common.b_s};
}

const PolicyResult* best_static(const CompareResult& result) {
  const PolicyResult* best = nullptr;
  for (const PolicyResult& p : result.policies) {
    // A static that trains nothing is no baseline: a speedup over it would read 0.00x.
    if (!is_static(p) || p.trained == 0) continue;
    if (best == nullptr || p.trained > best->trained ||
        (p.trained == best->trained && p.total_s < best->total_s))
      best = &p;
  }
  return best;
}

const PolicyResult* fastest_static(const CompareResult& result) {
  const PolicyResult* fastest = nullptr;
  for (const PolicyResult& p : result.policies)
    if (is_static(p) && (fastest == nullptr || p.tokens_per_second > fastest->tokens_per_second))
      fastest = &p;
  return fastest;
}

Speedup speedup(const CompareResult& result, const PolicyResult& policy, const PolicyResult& baseline,
                std::string role) {
  const CommonSteps common = result.common_steps(baseline, policy);
  return {policy.policy,
          baseline.policy,
          std::move(role),
          baseline.tokens_per_second > 0 ? policy.tokens_per_second / baseline.tokens_per_second : 0,
          common.b_s > 0 ? common.a_s / common.b_s : 0,
          common.steps};
}

std::vector<Speedup> group_speedups(const CompareResult& result) {
  const PolicyResult *best = nullptr, *flexsp = nullptr;
  for (const PolicyResult& p : result.policies) {
    if (!is_group_policy(p)) continue;
    if (p.policy == "flexsp") flexsp = &p;
    const bool better = best == nullptr || best == flexsp || p.trained_tokens > best->trained_tokens ||
                        (p.trained_tokens == best->trained_tokens && p.total_s < best->total_s);
    if (better && (p.policy != "flexsp" || best == nullptr)) best = &p;
  }
  std::vector<Speedup> out;
  if (best == nullptr) return out;
  const PolicyResult* fastest = fastest_static(result);
  const PolicyResult* most = best_static(result);
  const std::pair<const PolicyResult*, std::string> baselines[] = {
      {fastest,
       most == fastest ? "the fastest static, and the one that trains the most" : "the fastest static"},
      {most == fastest ? nullptr : most, "the static that trains the most"},
      {flexsp, ""}};
  for (const auto& [baseline, role] : baselines)
    if (baseline != nullptr && baseline != best) out.push_back(speedup(result, *best, *baseline, role));
  return out;
}

std::string speedups_text(const std::vector<Speedup>& speedups) {
  std::string text;
  for (const Speedup& s : speedups)
    text += fmt::format("{} over {}{}: {:.2f}x tokens/s, {:.2f}x on the {} steps both train whole\n",
                        s.policy, s.baseline, s.role.empty() ? "" : " (" + s.role + ")", s.tokens_per_s_ratio,
                        s.common_speedup, s.common_steps);
  return text;
}

std::string group_speedups_text(const CompareResult& result) {
  return speedups_text(group_speedups(result));
}

std::string steps_text(const RunDescription& run) {
  if (run.global_batch_tokens > 0)
    return fmt::format(
        "global batches of at most {} tokens per training step, packed (first-fit decreasing) into "
        "micro-batches of at most {} padded tokens (gradient accumulation)",
        run.global_batch_tokens, run.micro_batch_tokens);
  if (run.global_batch == 1) return "one sequence per training step";
  return fmt::format("{} sequences per training step, each its own micro-batch (gradient accumulation)",
                     run.global_batch);
}

std::string shard_group_text(const RunDescription& run) {
  if (run.shard_degree == 0) return "";
  const std::string reduced = fmt::format(", gradients reduced in {}", run.gradient_reduce_dtype);
  if (run.shard_degree == run.degree)
    return fmt::format("group policies shard every weight over the job's {} GPUs (fully sharded){}",
                       run.degree, reduced);
  return fmt::format(
      "group policies shard every weight over each shard group of {} GPUs, {} replicas (hybrid sharding){}",
      run.shard_degree, run.degree / run.shard_degree, reduced);
}

void to_json(nlohmann::json& j, const PolicyResult& policy) {
  j = {{"total_time_s", policy.total_s},
       {"host_bound_share", policy.total_s > 0 ? policy.host_bound_s / policy.total_s : 0.0},
       {"tokens_per_s", policy.tokens_per_second},
       {"mfu", policy.mfu},
       {"oom_count", policy.oom_count},
       {"oom_tokens", policy.oom_tokens},
       {"max_len_before_oom", policy.max_len_before_oom},
       {"switches", policy.plan_switches},
       {"strategy_time_shares", policy.strategy_time_shares},
       {"steps", policy.steps},
       {"trained", policy.trained},
       {"micro_batches", policy.micro_batches()},
       {"sequences", policy.results}};
  if (policy.rounds > 0) {
    j["rounds"] = policy.rounds;
    j["mean_imbalance"] = policy.mean_imbalance;
    j["solve_s"] = policy.solve_s;
    j["solver_predicted_s"] = policy.solver_predicted_s;
    j["solver_lower_bound_s"] = policy.solver_lower_bound_s;
  }
}

void to_json(nlohmann::json& j, const Speedup& s) {
  j = {{"policy", s.policy},
       {"baseline", s.baseline},
       {"baseline_role", s.role},
       {"tokens_per_s_ratio", s.tokens_per_s_ratio},
       {"speedup_on_common_steps", s.common_speedup},
       {"common_steps", s.common_steps}};
}

void to_json(nlohmann::json& j, const CompareResult& result) {
  j = {{"engine", result.engine}, {"method", result.method}, {"policies", nlohmann::json::object()}};
  if (result.interpolation) {
    j["simulations"] = result.simulations;
    j["interpolation_error"] = {{"samples", result.interpolation->count()},
                                {"mean_pct", result.interpolation->mean_pct()},
                                {"max_pct", result.interpolation->max_pct()}};
  }
  for (const PolicyResult& p : result.policies) j["policies"][p.policy] = p;
  for (const Speedup& s : group_speedups(result)) j["group_speedups"].push_back(s);
}

// "usp_u8 71%, megatron_ts 29%": the strategies by their share of the trained time, largest first,
// those under 0.5 % left out.
std::string strategy_shares_text(const std::map<std::string, double>& shares) {
  std::vector<std::pair<double, std::string>> by_share;
  for (const auto& [name, share] : shares)
    if (share >= 0.005) by_share.emplace_back(share, name);
  std::sort(by_share.begin(), by_share.end(), std::greater<>());
  std::string text;
  for (const auto& [share, name] : by_share)
    text += (text.empty() ? "" : ", ") + fmt::format("{} {:.0f}%", name, 100 * share);
  return text.empty() ? "-" : text;
}

nlohmann::json summary_json(const CompareResult& result, const RunDescription& run) {
  nlohmann::json j = run;
  j.update(nlohmann::json(result));
  if (nlohmann::json tuned = tuned_statics_json(result, run.micro_batch_tokens); !tuned.is_null())
    j["tuned_statics"] = std::move(tuned);
  return j;
}

std::string summary_table(const CompareResult& result) {
  std::size_t width = 20;
  for (const PolicyResult& p : result.policies) width = std::max(width, p.policy.size());
  std::string text =
      fmt::format("{:<{}} {:>12} {:>12} {:>7} {:>7} {:>7} {:>9} {:>9} {:>10} {:>11} {:>16} {:>9}  {}\n",
                  "policy", width, "total_time", "tokens_per_s", "MFU_%", "host_%", "steps", "micro_bs",
                  "trained", "oom_count", "oom_tokens", "max_len_before_oom", "switches", "strategies");
  for (const PolicyResult& p : result.policies)
    text += fmt::format(
        "{:<{}} {:>12} {:>12.0f} {:>7.1f} {:>7.1f} {:>7} {:>9} {:>9} {:>10} {:>11.0f} {:>16} {:>9}  {}\n",
        p.policy, width, hours(p.total_s), p.tokens_per_second, 100 * p.mfu,
        p.total_s > 0 ? 100 * p.host_bound_s / p.total_s : 0.0, p.steps, p.micro_batches(), p.trained,
        p.oom_count, p.oom_tokens, p.max_len_before_oom, p.plan_switches,
        strategy_shares_text(p.strategy_time_shares));
  return text;
}

CompareOutputs::CompareOutputs(const std::string& dir_name, PerSequenceFormat format) : dir_(dir_name) {
  if (fs::exists(dir_)) {
    if (!fs::is_directory(dir_))
      throw InputError("--out", 0, "", "'" + dir_name + "' exists and is not a folder");
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const std::string name = entry.path().filename().string();
      if (std::find(std::begin(kOutputs), std::end(kOutputs), name) == std::end(kOutputs))
        throw InputError("--out", 0, "",
                         "'" + dir_name + "' holds '" + name +
                             "', which is not the output of a compare run; "
                             "give an empty or new folder");
    }
  }
  partial_ = dir_.string() + ".partial";
  fs::remove_all(partial_);
  fs::create_directories(partial_);
  per_sequence_ = std::make_unique<PerSequenceFile>(partial_, format);
}

CompareOutputs::~CompareOutputs() {
  per_sequence_.reset();
  if (finished_) return;
  std::error_code ignored;
  fs::remove_all(partial_, ignored);
}

SequenceSink& CompareOutputs::sink() {
  return *per_sequence_;
}

void CompareOutputs::finish(const CompareResult& result, const RunDescription& run) {
  const fs::path& dir = dir_;
  const fs::path& partial = partial_;
  per_sequence_->finish();
  write_text(partial / "summary.json", summary_json(result, run).dump(2) + "\n");
  plot(result, run, partial);

  std::string report =
      fmt::format("# {} on {}: policies over the trace {}\n\n", run.model, run.cluster, run.trace);
  report += fmt::format("- Trace: {} ({}).\n", run.trace, run.trace_about);
  report += fmt::format("- Trained: {}\n", run.preparation);
  report += fmt::format("- Machine: {} GPUs of {}, degree {}, {}.\n", run.degree, run.cluster, run.degree,
                        steps_text(run));
  report += fmt::format(
      "- Framework: {}{}.\n",
      run.framework.empty() ? "the cluster file's own host block, or none" : run.framework,
      run.attention_implementation.empty() ? "" : ", attention by " + run.attention_implementation);
  if (const std::string shards = shard_group_text(run); !shards.empty())
    report += fmt::format("- Groups: {}.\n", shards);
  report += fmt::format("- Times: {}.\n", result.method);
  if (result.interpolation && result.interpolation->count() > 0)
    report += fmt::format(
        "- Interpolation error, {} sequences also simulated directly: mean {:.3f} %, max {:.3f} % ({} "
        "simulations "
        "in all).\n",
        result.interpolation->count(), result.interpolation->mean_pct(), result.interpolation->max_pct(),
        result.simulations);
  report += fmt::format("- Wall time of the run: {:.1f} s.\n\n", run.wall_s);
  report += "## Per policy\n\n```\n" + summary_table(result) + "```\n\n";
  if (const std::string speedups = group_speedups_text(result); !speedups.empty())
    report += "Groups:\n\n```\n" + speedups + "```\n\n";
  if (const std::string tuned = tuned_statics_text(result, run.micro_batch_tokens); !tuned.empty())
    report += "Tuned statics:\n\n```\n" + tuned + "```\n\n";
  report +=
      "`steps`: optimizer steps; `micro_bs`: micro-batches (one sequence each unless packed); `trained`: "
      "micro-batches whose plan fit in memory; `oom_count`: those that did not (not trained), and "
      "`oom_tokens` their tokens; `max_len_before_oom`: the longest micro-batch trained before the first out "
      "of memory; `switches`: trained micro-batches whose plan differs from the previous one's.\n\n";
  report += "## Each policy against each other\n\n";
  report +=
      "Time of the row's policy over the steps both policies trained whole, against the column's policy "
      "(negative: the row is faster).\n\n" +
      comparisons(result) + "\n";
  report += "## Cumulative training time\n\n![cumulative training time](cumulative_time.png)\n\n";
  report += "Each curve ends at its policy's first out-of-memory sequence.\n\n";
  report += "## Time of one step against length\n\n![time by length](time_by_length.png)\n";
  write_text(partial / "report.md", report);

  if (fs::exists(dir)) fs::remove_all(dir);
  fs::rename(partial, dir);
  finished_ = true;
}

}  // namespace paradyse::evaluation
