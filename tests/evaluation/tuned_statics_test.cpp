// Statics at their best micro-batch budget: each static run again at a budget gives what a run at that
// budget alone gives, on the same steps; the tuned budget trains the most tokens, then is the fastest;
// the other policies are compared with the tuned statics; bad budgets are refused naming the flag.
#include "evaluation/tuned_statics.hpp"

#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "evaluation/compare_job.hpp"

namespace paradyse::testing {
namespace {

evaluation::CompareJob packed_job() {
  evaluation::CompareJob job;
  job.engine = "analytic";
  job.trace = "github-code-like";
  job.limit = 600;
  job.policies.policies = "static:megatron_ts,static:ulysses_z,paradyse";
  job.global_batch_tokens = "256K";
  job.micro_batch_tokens = "32K";
  return job;
}

const evaluation::PolicyResult& policy_named(const evaluation::CompareResult& result,
                                             const std::string& name) {
  for (const evaluation::PolicyResult& p : result.policies)
    if (p.policy == name) return p;
  FAIL("no policy " << name);
  throw;
}

void check_same_run(const evaluation::PolicyResult& a, const evaluation::PolicyResult& b) {
  CHECK(a.total_s == b.total_s);
  CHECK(a.trained_tokens == b.trained_tokens);
  CHECK(a.oom_tokens == b.oom_tokens);
  CHECK(a.steps == b.steps);
  CHECK(a.results == b.results);
}

std::string refusal(const evaluation::CompareJob& job) {
  try {
    evaluation::check_compare_job(job);
  } catch (const InputError& e) {
    CHECK(e.file() == "--tune-statics");
    return e.what();
  }
  FAIL("accepted");
  return "";
}

}  // namespace

TEST_CASE(
    "tuned statics: each budget's run is the run at that budget alone, and the tuned one trains the "
    "most, then fastest",
    "[evaluation][compare]") {
  evaluation::CompareJob job = packed_job();
  const evaluation::CompareResult plain = evaluation::run_compare_job(job).result;
  job.tune_budgets = "8K,128K,32K";  // the run's own budget among them: left out
  const evaluation::CompareResult tuned = evaluation::run_compare_job(job).result;
  REQUIRE(tuned.policies.size() == plain.policies.size() + 2 * 2);

  // The run's own policies as they were; each variant as a run at its budget, its steps the same.
  for (const evaluation::PolicyResult& p : plain.policies) check_same_run(policy_named(tuned, p.policy), p);
  CHECK(evaluation::best_static(tuned)->policy == evaluation::best_static(plain)->policy);
  CHECK(evaluation::fastest_static(tuned)->policy == evaluation::fastest_static(plain)->policy);
  for (const char* budget : {"8K", "128K"}) {
    evaluation::CompareJob at_budget = packed_job();
    at_budget.micro_batch_tokens = budget;
    const evaluation::CompareResult alone = evaluation::run_compare_job(at_budget).result;
    for (const char* name : {"static:megatron_ts", "static:ulysses_z"}) {
      INFO(name << " at " << budget);
      check_same_run(policy_named(tuned, std::string(name) + "@" + budget), policy_named(alone, name));
    }
  }

  const std::vector<evaluation::TunedStatic> statics = evaluation::tuned_statics(tuned, 32 * 1024);
  REQUIRE(statics.size() == 2);
  for (const evaluation::TunedStatic& t : statics) {
    INFO(t.policy);
    REQUIRE(t.budgets.size() == 3);
    CHECK(t.budgets[0].first == 8 * 1024);
    CHECK(t.budgets[2].first == 128 * 1024);
    for (const auto& [budget, p] : t.budgets) {
      CHECK(p->trained_tokens <= t.result().trained_tokens);
      if (p->trained_tokens == t.result().trained_tokens)
        CHECK(p->tokens_per_second <= t.result().tokens_per_second);
    }
  }

  // paradyse against each distinct baseline, the fastest tuned static among them.
  const std::vector<evaluation::Speedup> speedups = evaluation::tuned_speedups(tuned, 32 * 1024);
  REQUIRE_FALSE(speedups.empty());
  const auto faster = [](const evaluation::TunedStatic& a, const evaluation::TunedStatic& b) {
    return a.result().tokens_per_second < b.result().tokens_per_second;
  };
  const std::string fastest = std::max_element(statics.begin(), statics.end(), faster)->result().policy;
  bool named = false;
  for (const evaluation::Speedup& s : speedups) {
    CHECK(s.policy == "paradyse");
    const evaluation::PolicyResult& baseline = policy_named(tuned, s.baseline);
    CHECK(s.tokens_per_s_ratio ==
          Approx(policy_named(tuned, "paradyse").tokens_per_second / baseline.tokens_per_second));
    CHECK(s.common_steps > 0);
    if (s.role.find("the fastest tuned static") != std::string::npos) {
      CHECK(s.baseline == fastest);
      named = true;
    }
  }
  CHECK(named);
  const nlohmann::json j = evaluation::tuned_statics_json(tuned, 32 * 1024);
  CHECK(j["statics"].size() == 2);
  CHECK(j["speedups"].size() == speedups.size());
  CHECK(evaluation::tuned_statics_json(plain, 32 * 1024).is_null());
}

TEST_CASE("tuned statics: budgets that cannot be searched are refused naming --tune-statics",
          "[evaluation][compare]") {
  evaluation::CompareJob job = packed_job();
  job.tune_budgets = "8K,8K";
  CHECK_THAT(refusal(job), Catch::Contains("the budget 8K is given twice"));
  job.tune_budgets = "32K,8K,32K";  // the run's own
  CHECK_THAT(refusal(job), Catch::Contains("the budget 32K is given twice"));
  job.tune_budgets = "1";
  CHECK_THAT(refusal(job), Catch::Contains("between 16 tokens (a document's padding)"));
  job.tune_budgets = "1M";
  CHECK_THAT(refusal(job), Catch::Contains("the global batch's 262144, got 1048576"));
  job.tune_budgets = "sixteen";
  refusal(job);
  job.tune_budgets = "64K";
  job.policies.policies = "paradyse,optimal";
  CHECK_THAT(refusal(job), Catch::Contains("no static policy"));
  job = packed_job();
  job.tune_budgets = "64K";
  job.global_batch_tokens = job.micro_batch_tokens = "0";
  CHECK_THAT(refusal(job), Catch::Contains("packed training"));
}

TEST_CASE("tuned statics: a budget variant's name gives back its policy and budget", "[evaluation]") {
  for (const int64_t budget : {int64_t{1000}, int64_t{32768}, int64_t{1} << 20, int64_t{3} << 19}) {
    CAPTURE(budget);
    const std::string name = evaluation::budget_variant_name("static:ulysses_z", budget);
    CHECK(name.starts_with("static:ulysses_z@"));
    const evaluation::BudgetVariant variant = evaluation::split_budget_variant(name);
    CHECK(variant.policy == "static:ulysses_z");
    CHECK(variant.budget_tokens == budget);
  }
  CHECK(evaluation::budget_variant_name("static:metp", int64_t{512} << 10) == "static:metp@512K");
  const evaluation::BudgetVariant plain = evaluation::split_budget_variant("static:metp");
  CHECK(plain.policy == "static:metp");
  CHECK(plain.budget_tokens == 0);
}

}  // namespace paradyse::testing
