#include "sim/executor.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <queue>

#include "common/errors.hpp"
#include "costmodel/op_time.hpp"
#include "sim/collective_flows.hpp"

namespace paradyse::sim {
namespace sg4 = simgrid::s4u;

namespace {

constexpr double kNotDone = -1;
constexpr OpId kNoOp = std::numeric_limits<OpId>::max();

struct Timer {
  double time;
  uint64_t sequence;  // ties go in the order the timers were set
  int rank;           // an op of this rank ends, or (rank < 0) collective `index` ends
  std::size_t index;
  bool operator>(const Timer& other) const {
    return time != other.time ? time > other.time : sequence > other.sequence;
  }
};

struct RankState {
  const Program* program = nullptr;
  std::array<std::vector<OpId>, 2> queue;  // per stream, in issue order
  std::array<std::size_t, 2> head{};
  std::array<bool, 2> busy{};
  std::vector<double> start, end;  // absolute simulated seconds
  std::size_t collectives_reached = 0;
  std::vector<std::pair<double, double>> compute_spans, communication_spans;
};

// The k-th collective of the group: the k-th communication op of every rank.
struct Collective {
  OpKind kind = OpKind::wait;
  std::vector<OpId> ops;
  int reached = 0;
  std::size_t flows_left = 0;
  double tail_s = 0;
};

// Seconds of `spans` not covered by `covered` (both sorted and disjoint).
double uncovered_s(const std::vector<std::pair<double, double>>& spans,
                   const std::vector<std::pair<double, double>>& covered) {
  double total = 0;
  std::size_t c = 0;
  for (auto [start, end] : spans) {
    double cursor = start;
    while (c < covered.size() && covered[c].second <= cursor) ++c;
    for (std::size_t k = c; k < covered.size() && covered[k].first < end; ++k) {
      if (covered[k].first > cursor) total += covered[k].first - cursor;
      cursor = std::max(cursor, covered[k].second);
    }
    if (end > cursor) total += end - cursor;
  }
  return total;
}

class Run {
 public:
  Run(const Platform& platform, const hw::ClusterSpec& cluster, const std::vector<Program>& programs,
      const SimulationOptions& options)
      : platform_(platform),
        cluster_(cluster),
        options_(options),
        p_(static_cast<int>(programs.size())),
        timer_(cluster, p_),
        fabric_(p_ > cluster.gpus_per_node ? cluster.inter_node : cluster.intra_node) {
    ranks_.resize(programs.size());
    for (std::size_t r = 0; r < programs.size(); ++r) {
      RankState& rank = ranks_[r];
      rank.program = &programs[r];
      const std::size_t n = programs[r].ops.size();
      rank.start.assign(n, kNotDone);
      rank.end.assign(n, kNotDone);
      for (OpId id = 0; id < n; ++id)
        rank.queue[static_cast<std::size_t>(programs[r].ops[id].stream)].push_back(id);
      ops_left_ += n;
    }
  }

  Execution execute() {
    origin_ = now_ = sg4::Engine::get_clock();
    while (true) {
      start_ready_ops();
      if (ops_left_ == 0) break;
      const double next_timer =
          timers_.empty() ? std::numeric_limits<double>::infinity() : timers_.top().time;
      if (comms_.empty()) {
        PARADYSE_CHECK(!timers_.empty(), "the simulated programs wait on each other: " + stuck_ranks());
        if (next_timer > now_) sg4::this_actor::sleep_until(next_timer);
        now_ = next_timer;
      } else {
        const double timeout = std::isinf(next_timer) ? -1 : std::max(0.0, next_timer - now_);
        const ssize_t done = sg4::Activity::wait_any_for(comms_, timeout);
        if (done >= 0) {
          now_ = sg4::Engine::get_clock();
          flow_done(static_cast<std::size_t>(done));
        } else {
          now_ = next_timer;
        }
      }
      while (!timers_.empty() && timers_.top().time <= now_) {
        const Timer timer = timers_.top();
        timers_.pop();
        if (timer.rank >= 0)
          finish(timer.rank, static_cast<OpId>(timer.index), timer.time);
        else
          finish_collective(timer.index, timer.time);
      }
    }
    return result();
  }

 private:
  const Op& op(int rank, OpId id) const { return ranks_[static_cast<std::size_t>(rank)].program->ops[id]; }

  void start_ready_ops() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < p_; ++r)
        for (Stream stream : {Stream::compute, Stream::communication})
          while (try_start(r, stream)) progress = true;
    }
  }

  bool try_start(int r, Stream stream) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    const auto s = static_cast<std::size_t>(stream);
    if (rank.busy[s] || rank.head[s] == rank.queue[s].size()) return false;
    const OpId id = rank.queue[s][rank.head[s]];
    const Op& o = rank.program->ops[id];
    for (OpId dep : o.deps)
      if (rank.end[dep] == kNotDone) return false;
    ++rank.head[s];
    rank.busy[s] = true;
    rank.start[id] = now_;
    if (o.kind == OpKind::wait) {
      finish(r, id, now_);
    } else if (is_communication(o.kind)) {
      reach_collective(r, id);
    } else {
      ++kernels_;
      set_timer(now_ + timer_.compute_s(o), r, id);
    }
    return true;
  }

  void set_timer(double time, int rank, std::size_t index) { timers_.push({time, sequence_++, rank, index}); }

  void finish(int r, OpId id, double time) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    const Op& o = rank.program->ops[id];
    rank.end[id] = time;
    rank.busy[static_cast<std::size_t>(o.stream)] = false;
    --ops_left_;
    if (is_communication(o.kind))
      rank.communication_spans.emplace_back(rank.start[id], time);
    else if (o.kind != OpKind::wait)
      rank.compute_spans.emplace_back(rank.start[id], time);
  }

  void reach_collective(int r, OpId id) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    const std::size_t k = rank.collectives_reached++;
    if (k == collectives_.size()) collectives_.emplace_back().ops.assign(static_cast<std::size_t>(p_), kNoOp);
    Collective& c = collectives_[k];
    const OpKind kind = op(r, id).kind;
    if (c.reached == 0) c.kind = kind;
    PARADYSE_CHECK(kind == c.kind, "collective " + std::to_string(k) + " is a " +
                                       std::string(to_string(kind)) + " on rank " + std::to_string(r) +
                                       " but a " + std::string(to_string(c.kind)) +
                                       " elsewhere: ranks must issue the same collectives in the same order");
    c.ops[static_cast<std::size_t>(r)] = id;
    if (++c.reached == p_) launch(k);
  }

  void launch(std::size_t k) {
    Collective& c = collectives_[k];
    std::vector<const Op*> ops;
    for (int r = 0; r < p_; ++r) ops.push_back(&op(r, c.ops[static_cast<std::size_t>(r)]));
    const Op& o = *ops.front();
    if (flow_count(o, p_, cluster_) > static_cast<std::size_t>(options_.max_flows_per_collective)) {
      ++analytic_collectives_;
      set_timer(now_ + timer_.communication_s(o), -1, k);
      return;
    }
    const CollectiveFlows plan = collective_flows(ops, cluster_);
    const double efficiency = size_efficiency(o);
    c.tail_s = std::max(0, plan.latency_hops - 1) * fabric_.hop_latency_s();
    c.flows_left = plan.flows.size();
    for (const Flow& flow : plan.flows) {
      const auto bytes = static_cast<uint64_t>(std::max(1.0, std::round(flow.bytes / efficiency)));
      comms_.push_back(sg4::Comm::sendto_async(platform_.gpu(flow.from), platform_.gpu(flow.to), bytes));
      comm_collective_.push_back(k);
    }
    flows_ += plan.flows.size();
    if (plan.flows.empty()) finish_collective(k, now_);
  }

  double size_efficiency(const Op& o) const {
    double efficiency = fabric_.streaming_bandwidth(o.size_bytes) / fabric_.peak_bus_bandwidth();
    if (o.kind == OpKind::all_to_all && p_ <= cluster_.gpus_per_node)
      efficiency *= fabric_.all_to_all_efficiency;
    return efficiency;
  }

  void flow_done(std::size_t i) {
    const std::size_t k = comm_collective_[i];
    comms_[i] = comms_.back();
    comms_.pop_back();
    comm_collective_[i] = comm_collective_.back();
    comm_collective_.pop_back();
    Collective& c = collectives_[k];
    if (--c.flows_left > 0) return;
    if (c.tail_s > 0)
      set_timer(now_ + c.tail_s, -1, k);
    else
      finish_collective(k, now_);
  }

  void finish_collective(std::size_t k, double time) {
    for (int r = 0; r < p_; ++r) finish(r, collectives_[k].ops[static_cast<std::size_t>(r)], time);
  }

  std::string stuck_ranks() const {
    std::string text;
    for (int r = 0; r < p_; ++r) {
      const RankState& rank = ranks_[static_cast<std::size_t>(r)];
      for (std::size_t s = 0; s < 2; ++s)
        if (rank.head[s] < rank.queue[s].size()) {
          const Op& o = op(r, rank.queue[s][rank.head[s]]);
          text += "rank " + std::to_string(r) + " " + (s == 0 ? "compute" : "communication") + " stream at " +
                  std::string(to_string(o.kind)) + " " + std::string(rank.program->label(o)) + "; ";
        }
    }
    return text;
  }

  Execution result() const {
    Execution e;
    e.kernels = kernels_;
    e.flows = flows_;
    e.analytic_collectives = analytic_collectives_;
    double last = origin_;
    for (const RankState& rank : ranks_)
      for (double end : rank.end) last = std::max(last, end);
    e.seconds = last - origin_;
    for (const RankState& rank : ranks_) {
      RankResult& out = e.per_rank.emplace_back();
      for (auto [start, end] : rank.compute_spans) out.compute_s += end - start;
      out.exposed_comm_s = uncovered_s(rank.communication_spans, rank.compute_spans);
      out.idle_s = std::max(0.0, e.seconds - out.compute_s - out.exposed_comm_s);
      if (!options_.record_timeline) continue;
      RankTimeline& timeline = e.timeline.emplace_back();
      for (std::size_t i = 0; i < rank.start.size(); ++i) {
        timeline.op_start_s.push_back(rank.start[i] - origin_);
        timeline.op_end_s.push_back(rank.end[i] - origin_);
      }
    }
    return e;
  }

  const Platform& platform_;
  const hw::ClusterSpec& cluster_;
  const SimulationOptions& options_;
  const int p_;
  const costmodel::OpTimer timer_;
  const hw::FabricSpec& fabric_;

  std::vector<RankState> ranks_;
  std::vector<Collective> collectives_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  std::vector<sg4::ActivityPtr> comms_;  // the flows in flight
  std::vector<std::size_t> comm_collective_;
  double origin_ = 0, now_ = 0;
  std::size_t ops_left_ = 0;
  uint64_t sequence_ = 0, kernels_ = 0, flows_ = 0, analytic_collectives_ = 0;
};

}  // namespace

Execution execute(const Platform& platform, const hw::ClusterSpec& cluster,
                  const std::vector<Program>& programs, const SimulationOptions& options) {
  PARADYSE_CHECK(!programs.empty() && static_cast<int>(programs.size()) <= platform.num_gpus(),
                 "programs for " + std::to_string(programs.size()) + " ranks on " +
                     std::to_string(platform.num_gpus()) + " GPUs");
  return Run(platform, cluster, programs, options).execute();
}

}  // namespace paradyse::sim
