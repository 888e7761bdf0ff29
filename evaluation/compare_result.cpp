#include "evaluation/compare_result.hpp"

#include <algorithm>
#include <bit>

#include "common/errors.hpp"
#include "evaluation/micro_batch_budgets.hpp"
#include "strategies/strategy.hpp"

namespace paradyse::evaluation {

namespace {

// The strategy of each layer of a plan_name() ("a", or "a,b:full,..."): a uniform plan's one name.
std::vector<std::string> layer_strategy_names(const std::string& plan) {
  std::vector<std::string> names;
  for (std::size_t start = 0; start < plan.size();) {
    const std::size_t end = std::min(plan.find(',', start), plan.size());
    const std::string layer = plan.substr(start, end - start);
    const std::string name = layer.substr(0, layer.find(':'));
    if (find_strategy(name) != nullptr) names.push_back(name);
    start = end + 1;
  }
  return names;
}

void add_point(PolicyCurves& curves, const PolicyCurves::Point& point) {
  if ((point.position - 1) % curves.stride != 0) {
    curves.last = point;
    return;
  }
  curves.last.reset();
  curves.cumulative.push_back(point);
  if (curves.cumulative.size() < 2 * PolicyCurves::kPoints) return;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < curves.cumulative.size(); i += 2)
    curves.cumulative[kept++] = curves.cumulative[i];
  curves.cumulative.resize(kept);
  curves.stride *= 2;
}

// `tokens` with all but its `bits` leading binary digits cleared.
int64_t leading_bits(int64_t tokens, int bits) {
  const int width = static_cast<int>(std::bit_width(static_cast<uint64_t>(tokens)));
  return width <= bits ? tokens : tokens >> (width - bits) << (width - bits);
}

void add_length(PolicyCurves& curves, int64_t padded_tokens, double seconds) {
  curves.step_by_length[leading_bits(padded_tokens, curves.length_bits)] = seconds;
  while (curves.step_by_length.size() > PolicyCurves::kLengths) {
    curves.length_bits = std::min(curves.length_bits, 24) - 1;
    std::map<int64_t, double> coarser;
    for (const auto& [tokens, time] : curves.step_by_length)
      coarser[leading_bits(tokens, curves.length_bits)] = time;
    curves.step_by_length = std::move(coarser);
  }
}

}  // namespace

bool is_budget_variant(const PolicyResult& p) {
  return split_budget_variant(p.policy).budget_tokens != 0;
}

bool is_static(const PolicyResult& p) {
  return p.policy.starts_with("static:") && !is_budget_variant(p);
}

CommonSteps CompareResult::common_steps(const PolicyResult& a, const PolicyResult& b) const {
  const auto index = [&](const PolicyResult& p) {
    const std::size_t i = static_cast<std::size_t>(&p - policies.data());
    PARADYSE_CHECK(i < policies.size(), "a policy of this result");
    return i;
  };
  if (common.empty()) return {};
  return common[index(a) * policies.size() + index(b)];
}

CompareRecorder::CompareRecorder(std::vector<std::string> policies, SequenceSink* sink)
    : running_(policies.size()), sink_(sink) {
  for (const std::string& name : policies) result_.policies.push_back({.policy = name});
  result_.common.resize(policies.size() * policies.size());
  if (sink_ != nullptr) sink_->start(policies);
}

void CompareRecorder::add_strategy_time(Running& running, const std::string& plan, double seconds) {
  auto names = layer_names_.find(plan);
  if (names == layer_names_.end()) names = layer_names_.emplace(plan, layer_strategy_names(plan)).first;
  for (const std::string& name : names->second)
    running.strategy_s[name] += seconds / static_cast<double>(names->second.size());
}

void CompareRecorder::add(std::size_t p, const SequenceResult& s) {
  PolicyResult& out = result_.policies.at(p);
  Running& running = running_[p];
  ++out.results;
  if (sink_ != nullptr) sink_->write(p, s);

  if (running.chunk_steps.empty() || running.chunk_steps.back().step != s.step) {
    PARADYSE_CHECK(running.chunk_steps.empty() || running.chunk_steps.back().step < s.step,
                   "a policy's results step by step, in order");
    running.chunk_steps.push_back({.step = s.step});
  }
  StepTime& step = running.chunk_steps.back();
  step.seconds += s.seconds;
  step.whole = step.whole && s.fits;
  if (s.fits && !step.trained) {  // an optimizer step
    step.trained = true;
    ++out.steps;
  }

  if (!s.fits) {
    ++out.oom_count;
    out.oom_tokens += static_cast<double>(s.tokens);
    if (out.first_oom < 0) out.first_oom = s.index;
    return;
  }
  ++out.trained;
  out.total_s += s.seconds;
  out.host_bound_s += s.host_bound_s;
  out.trained_tokens += static_cast<double>(s.tokens);
  out.model_flops += s.model_flops;
  if (out.first_oom < 0) {
    out.max_len_before_oom = std::max(out.max_len_before_oom, s.tokens);
    add_point(out.curves, {.position = s.index + 1, .tokens = s.tokens, .seconds = out.total_s});
  }
  add_length(out.curves, s.padded_tokens, s.seconds);
  if (!running.previous_plan.empty() && s.plan != running.previous_plan) ++out.plan_switches;
  running.previous_plan = s.plan;
  add_strategy_time(running, s.plan, s.seconds);
}

void CompareRecorder::end_chunk() {
  const std::size_t n = running_.size();
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      CommonSteps& common = result_.common[a * n + b];
      const std::vector<StepTime>& as = running_[a].chunk_steps;
      const std::vector<StepTime>& bs = running_[b].chunk_steps;
      auto j = bs.begin();
      for (const StepTime& step : as) {
        while (j != bs.end() && j->step < step.step) ++j;
        if (j == bs.end()) break;
        if (j->step != step.step || !step.whole || !j->whole) continue;
        common.a_s += step.seconds;
        common.b_s += j->seconds;
        ++common.steps;
      }
    }
  for (Running& running : running_) running.chunk_steps.clear();
}

CompareResult CompareRecorder::finish(const hw::ClusterSpec& cluster, int degree) {
  end_chunk();
  for (std::size_t p = 0; p < running_.size(); ++p) {
    PolicyResult& out = result_.policies[p];
    if (out.curves.last) out.curves.cumulative.push_back(*out.curves.last);
    out.curves.last.reset();
    if (out.total_s <= 0) continue;
    for (const auto& [name, seconds] : running_[p].strategy_s)
      out.strategy_time_shares[name] = seconds / out.total_s;
    out.tokens_per_second = out.trained_tokens / out.total_s;
    out.mfu = out.model_flops / (out.total_s * degree * cluster.gpu.bf16_flops_per_second);
  }
  return std::move(result_);
}

}  // namespace paradyse::evaluation
