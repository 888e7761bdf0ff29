#include "selector/group_costs.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

#include "common/errors.hpp"
#include "common/units.hpp"
#include "costmodel/program_cost.hpp"
#include "strategies/grouped_step.hpp"
#include "strategies/layer_flat_layout.hpp"

namespace paradyse::selector {

namespace {
std::string gib(double bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << bytes / kGiB << " GiB";
  return out.str();
}
}  // namespace

struct GroupCosts::AtDegree {
  AtDegree(const ModelSpec& model, const hw::ClusterSpec& cluster, int degree, const std::string& policy_name)
      : source(model, cluster, degree),
        policy(policy_name == kSwitching ? nullptr : make_policy(policy_name, source)),
        timer(cluster, degree) {}
  AnalyticCostSource source;
  std::unique_ptr<Policy> policy;  // null: kSwitching, priced as the grouped step runs it
  costmodel::OpTimer timer;
  int64_t capacity_tokens = 0;
  double micro_batch_s = 0;                              // GroupProblem::micro_batch_s
  int64_t packing_tokens = 0;                            // GroupProblem::packing_tokens
  double hidden_s = 0;                                   // GroupProblem::hidden_s
  std::unordered_map<int64_t, SequencePrice> sequences;  // by (grid) length
};

void check_group_job(const ModelSpec& model, const hw::ClusterSpec& cluster, int job, int shard_degree) {
  if (job < 1 || (job & (job - 1)) != 0 || job > cluster.num_gpus())
    throw InputError("", 0, "job",
                     "expected a power of two of GPUs up to the " + std::to_string(cluster.num_gpus()) +
                         " of " + cluster.name + ", got " + std::to_string(job));
  const int shard = shard_degree == 0 ? job : shard_degree;
  if (shard < 1 || job % shard != 0)
    throw InputError("", 0, "shard group",
                     "a shard group of " + std::to_string(shard) + " GPUs does not divide the job's " +
                         std::to_string(job) + " GPUs");
  // Every GPU of a shard group holds 1/shard of the weights, gradients and optimizer state
  // (grouped_step.hpp).
  const double static_bytes = steps::static_memory_bytes(model, shard, WeightLayout::job);
  if (static_bytes > cluster.tensor_capacity_bytes())
    throw InputError("", 0, "job",
                     model.name + "'s weights, gradients and optimizer state take " + gib(static_bytes) +
                         " a GPU sharded over " + std::to_string(shard) + " GPUs, more than the " +
                         gib(cluster.tensor_capacity_bytes()) + " a GPU of " + cluster.name +
                         " holds: shard over " + (shard < job ? "the whole job" : "more GPUs"));
}

void check_group_degrees(const std::vector<int>& degrees, int job) {
  for (const int degree : degrees) {
    if (degree < 1 || job % degree != 0)
      throw InputError("--group-sizes", 0, "",
                       "a group of " + std::to_string(degree) + " GPUs does not divide the job's " +
                           std::to_string(job) + " GPUs: expected powers of two up to " +
                           std::to_string(job));
    if ((degree & (degree - 1)) != 0)
      throw InputError(
          "--group-sizes", 0, "",
          "a group of " + std::to_string(degree) +
              " GPUs is not a power of two: groups sit aligned in the job (expected powers of two "
              "up to " +
              std::to_string(job) + ")");
  }
}

GroupCosts::GroupCosts(const ModelSpec& model, const hw::ClusterSpec& cluster, int job,
                       const std::string& policy, int64_t max_tokens, const GroupPricingOptions& options)
    : model_(model),
      cluster_(cluster),
      job_(job),
      shard_degree_(options.shard_degree == 0 ? job : options.shard_degree),
      gradient_reduce_dtype_(options.gradient_reduce_dtype),
      causal_(model.causal),
      candidates_(
          all_candidates(options.recompute_choices, false, cluster.gpu.host_link_bytes_per_second > 0)) {
  check_group_job(model_, cluster_, job, shard_degree_);
  check_group_degrees(options.degrees, job);
  const auto allowed = [&](int degree) {
    return options.degrees.empty() ||
           std::find(options.degrees.begin(), options.degrees.end(), degree) != options.degrees.end();
  };
  static_bytes_ = steps::static_memory_bytes(model_, shard_degree_, WeightLayout::job);
  prefetch_bytes_ = static_cast<double>(layer_flat_layout(model_).padded(shard_degree_)) *
                    dtype_bytes(DType::bf16) * (1 + cluster_.gpu.allocator_fragmentation);
  // What a round costs a rank that trains nothing: the job's collectives alone.
  {
    StepSpec nothing;
    nothing.model = &model_;
    GroupedStepSpec idle = one_round({{0, job, nothing}}, true);
    idle.skip_idle_rounds = false;  // as a rank without work whose shard group trains
    const costmodel::ProgramPrice price =
        costmodel::price_program(trace_grouped_step(idle, 0, job), costmodel::OpTimer(cluster_, job), 0, 0);
    round_s_ = price.seconds - price.optimizer_s;
  }
  const int64_t longest = grid_tokens(max_tokens);
  std::vector<int64_t> grid;  // the grid's lengths up to the longest sequence's
  for (int64_t tokens = 1; grid.empty() || grid.back() < longest;) {
    const int64_t point = grid_tokens(tokens);
    if (grid.empty() || point > grid.back()) grid.push_back(point);
    tokens = std::max(point + 1, static_cast<int64_t>(static_cast<double>(point) * 1.05));
  }
  for (int degree = 1; degree <= job; degree *= 2) {
    if (!allowed(degree)) continue;
    degrees_.push_back(degree);
    at_degree_.push_back(std::make_unique<AtDegree>(model_, cluster_, degree, policy));
    // The longest grid length whose program fits: bisection, as memory grows with the length.
    std::size_t fit = 0, unfit = grid.size();  // grid[fit − 1] fits (fit 0: none known), grid[unfit] does not
    while (fit < unfit) {
      const std::size_t mid = (fit + unfit) / 2;
      if (price(MicroBatch::sequence(grid[mid]), degree).fits)
        fit = mid + 1;
      else
        unfit = mid;
    }
    at_degree_.back()->capacity_tokens = fit == 0 ? 0 : grid[fit - 1];
    if (fit > 0) {
      // A micro-batch's cost however few its tokens: the shortest grid length's, beyond the round's.
      const Price shortest = price(MicroBatch::sequence(grid[0]), degree);
      at_degree_.back()->micro_batch_s = std::max(0.0, shortest.seconds - round_s_);
      // The packing limit: the longest grid length that the plan of a micro-batch at the limit holds.
      // From the shortest one's plan, whose limit's own plan may hold more (a tiny micro-batch's fastest
      // plan, tensor parallelism, holds fewer tokens than Ulysses, the fastest at hundreds of
      // thousands), until the plan at the limit is the plan that set it.
      std::size_t packs = 1;
      for (Plan plan = shortest.plan;;) {
        std::size_t holds = packs, overflows = fit;
        while (holds < overflows) {
          const std::size_t mid = (holds + overflows) / 2;
          if (held(plan, price_round(MicroBatch::sequence(grid[mid]), degree, plan, false), true).fits)
            holds = mid + 1;
          else
            overflows = mid;
        }
        Plan at_limit = price(MicroBatch::sequence(grid[holds - 1]), degree).plan;
        const bool settled = holds == packs || at_limit == plan;
        packs = std::max(packs, holds);
        if (settled) break;
        plan = std::move(at_limit);
      }
      at_degree_.back()->packing_tokens = grid[packs - 1];
      // What the prefetch hides: its gain on a micro-batch at the packing limit, on that one's plan.
      const MicroBatch full = MicroBatch::sequence(grid[packs - 1]);
      const Price off = price(full, degree);
      const costmodel::ProgramPrice on = price_round(full, degree, off.plan, true);
      at_degree_.back()->hidden_s = std::max(0.0, off.seconds - (on.seconds - on.optimizer_s));
    }
    if (fit == 0) {  // the policy trains nothing on this many ranks
      degrees_.pop_back();
      at_degree_.pop_back();
    }
  }
  // What the replicas' sums add to a step (hybrid sharding), beyond a round whose backward starts them:
  // on a group of a shard group's ranks, at its packing limit.
  if (const auto at_shard = std::find(degrees_.begin(), degrees_.end(), shard_degree_);
      shard_degree_ < job_ && at_shard != degrees_.end()) {
    const int64_t tokens = at_degree_[static_cast<std::size_t>(at_shard - degrees_.begin())]->packing_tokens;
    const MicroBatch full = MicroBatch::sequence(tokens);
    const Plan plan = price(full, shard_degree_).plan;
    const costmodel::ProgramPrice without = price_round(full, shard_degree_, plan, true);
    const costmodel::ProgramPrice with = price_round(full, shard_degree_, plan, true, true);
    step_s_ = std::max(0.0, (with.seconds - with.optimizer_s) - (without.seconds - without.optimizer_s));
  }
  if (degrees_.empty())
    throw InputError("", 0, "",
                     "priced by " + policy + ", not even a sequence of " + std::to_string(grid.front()) +
                         " tokens fits any group of " +
                         (options.degrees.empty() ? "up to " + std::to_string(job) + " GPUs"
                                                  : "the sizes allowed (--group-sizes)") +
                         " of " + cluster_.name +
                         ": every global batch would fit nowhere (more GPUs, or GPUs with more memory)");
}

GroupCosts::~GroupCosts() = default;

namespace {
// The grid's points are 1.05^k, padded: k of the point at or above `tokens`.
double grid_exponent(int64_t tokens) {
  return std::ceil(std::log(static_cast<double>(std::max<int64_t>(tokens, 1))) / std::log(1.05) - 1e-9);
}
int64_t grid_power(double exponent) {
  return static_cast<int64_t>(std::ceil(std::pow(1.05, exponent) - 1e-6));
}
}  // namespace

int64_t GroupCosts::grid_tokens(int64_t tokens) const {
  return SequenceLayout::padded_length(std::max(grid_power(grid_exponent(tokens)), tokens), job_, causal_);
}

int64_t GroupCosts::grid_below(int64_t tokens) const {
  return SequenceLayout::padded_length(grid_power(grid_exponent(tokens) - 1), job_, causal_);
}

GroupCosts::AtDegree& GroupCosts::at(int degree) {
  for (std::size_t i = 0; i < degrees_.size(); ++i)
    if (degrees_[i] == degree) return *at_degree_[i];
  PARADYSE_CHECK(false, "a group of " + std::to_string(degree) + " ranks, which no policy prices");
  return *at_degree_.front();
}

GroupCosts::Price GroupCosts::price(const MicroBatch& micro_batch, int degree) {
  AtDegree& priced = at(degree);
  // Each plan's program priced once, held to both memory limits: with the prefetch's layer and without.
  std::map<Plan, costmodel::ProgramPrice> programs;
  const PlanPricer plan_price = [&](const Plan& plan, bool prefetch) {
    auto it = programs.find(plan);
    if (it == programs.end())
      it = programs.emplace(plan, price_round(micro_batch, degree, plan, false)).first;
    return held(plan, it->second, prefetch);
  };
  Plan decided;
  if (priced.policy) {
    decided = priced.policy->decide(micro_batch).plan;
    if (decided.empty()) return {};
  }
  const auto best = [&](bool prefetch) {
    return priced.policy ? plan_price(decided, prefetch) : price_switching(plan_price, degree, prefetch);
  };
  const Price with = best(true);
  // A round goes without the prefetch on every rank of it, so only a group that is its round's only one
  // (the whole job) bears all that it costs; elsewhere the round's other groups would lose their
  // hidden gathers too, which a sequence's price cannot carry.
  if (degree != job_) return with;
  const Price without = best(false);
  if (!without.fits || (with.fits && without.seconds >= with.seconds)) return with;
  if (!with.fits) return without;
  // Relief pays where the leaner limit's plan is faster by more than the prefetch hides under the other.
  const costmodel::ProgramPrice on = price_round(micro_batch, degree, with.plan, true);
  const double hidden_s = with.seconds - (on.seconds - on.optimizer_s);
  return without.seconds < with.seconds - hidden_s ? without : with;
}

GroupCosts::Price GroupCosts::held(const Plan& plan, const costmodel::ProgramPrice& program,
                                   bool prefetch) const {
  Price result;
  result.plan = plan;
  result.seconds = program.seconds - program.optimizer_s;
  result.peak_bytes = program.peak_bytes + (prefetch ? prefetch_bytes_ : 0);
  result.fits = cluster_.holds(result.peak_bytes, program.host_peak_bytes);
  result.prefetch = prefetch;
  return result;
}

GroupCosts::Price GroupCosts::price_switching(const PlanPricer& plan_price, int degree, bool prefetch) {
  const auto layers = static_cast<int>(model_.num_layers);
  struct Priced {
    CandidateKey key;
    Price price;
  };
  std::vector<Priced> uniform;
  for (const CandidateKey& key : candidates_)
    if (!key.first->unsupported(model_, degree))
      uniform.push_back({key, plan_price(uniform_plan(*key.first, layers, key.second), prefetch)});
  Price best;
  for (const Priced& u : uniform)
    if (u.price.fits && (!best.fits || u.price.seconds < best.seconds)) best = u.price;
  if (!best.fits) return best;
  // Worth mixing: faster candidates that do not fit with leaner ones that do, each on its Pareto front
  // of time and memory (another both faster and leaner makes it useless).
  const auto front = [&](bool fits) {
    std::vector<const Priced*> out;
    for (const Priced& u : uniform) {
      if (u.price.fits != fits || (!fits && u.price.seconds >= best.seconds)) continue;
      bool dominated = false;
      for (const Priced& v : uniform)
        dominated =
            dominated || (&v != &u && v.price.fits == fits && v.price.seconds <= u.price.seconds &&
                          v.price.peak_bytes <= u.price.peak_bytes &&
                          (v.price.seconds < u.price.seconds || v.price.peak_bytes < u.price.peak_bytes));
      if (!dominated) out.push_back(&u);
    }
    return out;
  };
  // `count` layers of `fast`, the rest `lean`, the faster of the two orders that fits.
  const auto mix = [&](const CandidateKey& fast, const CandidateKey& lean, int count) {
    Price mixed;
    for (const bool fast_first : {true, false}) {
      Plan plan;
      for (int l = 0; l < layers; ++l) {
        const bool is_fast = fast_first ? l < count : l >= layers - count;
        const CandidateKey& key = is_fast ? fast : lean;
        plan.push_back({key.first, key.second});
      }
      Price p = plan_price(plan, prefetch);
      if (p.fits && (!mixed.fits || p.seconds < mixed.seconds)) mixed = std::move(p);
    }
    return mixed;
  };
  for (const Priced* fast : front(false))
    for (const Priced* lean : front(true)) {
      int fits = 0, unfit = layers;  // layers of `fast`: `fits` known to fit, `unfit` not
      Price at_fits;
      while (unfit - fits > 1) {
        const int mid = (fits + unfit) / 2;
        Price p = mix(fast->key, lean->key, mid);
        if (p.fits) {
          fits = mid;
          at_fits = std::move(p);
        } else {
          unfit = mid;
        }
      }
      if (fits > 0 && at_fits.seconds < best.seconds) best = std::move(at_fits);
    }
  return best;
}

costmodel::ProgramPrice GroupCosts::price_round(const MicroBatch& micro_batch, int degree, const Plan& plan,
                                                bool prefetch, bool sum_over_replicas) {
  StepSpec micro;
  micro.model = &model_;
  const std::vector<int64_t> padded = micro_batch.padded_documents(degree, causal_);
  for (const int64_t length : padded) micro.tokens += length;
  if (padded.size() > 1) micro.documents = padded;
  micro.plan = plan;
  Round round{{0, degree, micro}};
  if (degree < job_) {
    StepSpec idle;
    idle.model = &model_;
    round.push_back({degree, job_ - degree, idle});
  }
  return costmodel::price_program(
      trace_grouped_step(one_round(std::move(round), prefetch, sum_over_replicas), 0, job_), at(degree).timer,
      static_bytes_, cluster_.gpu.allocator_fragmentation);
}

GroupedStepSpec GroupCosts::one_round(Round round, bool prefetch, bool sum_over_replicas) const {
  GroupedStepSpec spec;
  spec.model = &model_;
  spec.num_layers = static_cast<int>(model_.num_layers);
  spec.rounds = {std::move(round)};
  spec.shard_degree = shard_degree_;
  spec.gradient_reduce_dtype = gradient_reduce_dtype_;
  spec.prefetch_gathers = prefetch;
  spec.sum_over_replicas = sum_over_replicas;
  return spec;
}

GroupCosts::SequencePrice GroupCosts::sequence_s(int64_t length, int degree) {
  const AtDegree& at_degree = at(degree);
  const double fixed_s = round_s_ + at_degree.micro_batch_s;
  // A micro-batch whose round goes without the prefetch leaves exposed what the prefetch would hide.
  const auto work_s = [&](const Price& p) {
    return std::max(0.0, p.seconds - fixed_s) + (p.prefetch ? 0 : at_degree.hidden_s);
  };
  if (const int64_t copies = at_degree.packing_tokens / length; copies >= 2) {
    Price packed = price(MicroBatch{std::vector<int64_t>(static_cast<std::size_t>(copies), length)}, degree);
    if (packed.fits) return {work_s(packed) / static_cast<double>(copies), std::move(packed.plan)};
  }
  Price alone = price(MicroBatch::sequence(length), degree);
  if (!alone.fits) return {};
  return {work_s(alone), std::move(alone.plan)};
}

GroupProblem GroupCosts::problem(const std::vector<int64_t>& tokens) {
  GroupProblem problem;
  problem.job = job_;
  problem.degrees = degrees_;
  problem.round_s = round_s_;
  problem.shard_degree = shard_degree_ < job_ ? shard_degree_ : 0;
  problem.step_s = step_s_;
  for (const int64_t length : tokens) problem.tokens.push_back(grid_tokens(length));
  // A (grid) length's seconds, priced once.
  const auto priced = [&](AtDegree& at_degree, int degree, int64_t length) -> const SequencePrice& {
    auto [it, added] = at_degree.sequences.try_emplace(length);
    if (added && length <= at_degree.capacity_tokens) it->second = sequence_s(length, degree);
    return it->second;
  };
  for (const auto& at_degree : at_degree_) {
    problem.capacity_tokens.push_back(at_degree->capacity_tokens);
    problem.micro_batch_s.push_back(at_degree->micro_batch_s);
    problem.packing_tokens.push_back(at_degree->packing_tokens);
    problem.hidden_s.push_back(at_degree->hidden_s);
  }
  for (std::size_t s = 0; s < tokens.size(); ++s) {
    // Capacity and packing go by the grid length at or above the sequence's (problem.tokens). Its time
    // goes by its tokens as its group pads them: between the grid lengths around them (a long
    // sequence's attention grows as its square, so the point above would overprice it by up to
    // 10 %), or below the grid's first point on a group smaller than the job, in proportion to them.
    const int64_t above = problem.tokens[s];
    std::vector<double>& row = problem.seconds.emplace_back();
    for (std::size_t i = 0; i < degrees_.size(); ++i) {
      AtDegree& at_degree = *at_degree_[i];
      const int64_t length = std::min(above, SequenceLayout::padded_length(tokens[s], degrees_[i], causal_));
      const int64_t below = grid_below(length);
      // Copies: pricing another length may move the map's entries.
      const SequencePrice at_above = priced(at_degree, degrees_[i], above);
      if (length == above || !std::isfinite(at_above.seconds)) {
        row.push_back(at_above.seconds);
      } else if (below >= length) {
        row.push_back(at_above.seconds * static_cast<double>(length) / static_cast<double>(above));
      } else if (const SequencePrice at_below = priced(at_degree, degrees_[i], below);
                 at_below.plan != at_above.plan) {
        // A leaner plan takes over between them: the length itself.
        row.push_back(priced(at_degree, degrees_[i], length).seconds);
      } else {
        const double share = static_cast<double>(length - below) / static_cast<double>(above - below);
        row.push_back(at_below.seconds + share * (at_above.seconds - at_below.seconds));
      }
    }
  }
  return problem;
}

}  // namespace paradyse::selector
