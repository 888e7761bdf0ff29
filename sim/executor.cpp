#include "sim/executor.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <queue>
#include <unordered_map>

#include <boost/container/small_vector.hpp>

#include "common/errors.hpp"
#include "costmodel/collective_flows.hpp"
#include "costmodel/op_time.hpp"

namespace paradyse::sim {
namespace sg4 = simgrid::s4u;

namespace {

constexpr double kNotDone = -1;
constexpr OpId kNoOp = std::numeric_limits<OpId>::max();
constexpr std::size_t kWake = std::numeric_limits<std::size_t>::max();  // a Timer that wakes a rank

struct Timer {
  double time;
  uint64_t sequence;  // ties go in the order the timers were set
  int rank;  // op `index` of this rank ends, or (index kWake) the rank wakes; < 0: collective `index` ends
  std::size_t index;
  bool operator>(const Timer& other) const {
    return time != other.time ? time > other.time : sequence > other.sequence;
  }
};

struct RankState {
  const Program* program = nullptr;
  std::array<std::vector<OpId>, kStreamCount> queue;  // per stream, in issue order
  std::array<std::size_t, kStreamCount> head{};
  std::array<std::size_t, kStreamCount> deps_met{};  // leading deps of the head op known to be done
  std::array<bool, kStreamCount> busy{};
  std::vector<double> start, end;  // absolute simulated seconds
  // The host (only when the cluster's host costs anything or it waits for an op): it has issued ops
  // [0, host_next), op i at issue[i] after issue_cost[i] of its time (OpTimer::issue_s); it is free
  // again at host_time, or once op host_blocked_on ends.
  std::vector<double> issue, issue_cost;
  OpId host_next = 0;
  double host_time = 0;
  OpId host_blocked_on = kNoOp;
  std::array<bool, kStreamCount> wake_set{};  // a wake-up is pending for the stream's head op
  // The compute op running (kNoOp: none): its seconds left at the full rate as of `compute_since`.
  // It runs at 1 − contention, the share that the collective in flight on this rank takes.
  OpId compute_op = kNoOp;
  double compute_left_s = 0, compute_since = 0, contention = 0;
  // The compute ops that run back to back from compute_op on, as one event: chain[0] is compute_op,
  // each later one starts as the one before ends (or, when the host has not issued it by then, at its
  // issue), at the present rate; planned with their full-rate seconds, planned starts and ends. The
  // timer is set for the last one's end, compute_end (a timer for another end is stale).
  std::vector<OpId> chain;
  std::vector<double> chain_work_s, chain_start, chain_end;
  double compute_end = 0;
  // By op: the compute op after it may start the moment it ends, without an event of its own
  // (chains_into_next).
  std::vector<uint8_t> chains_on;
  // Collectives reached, by group (group_key): a rank is in a handful of groups.
  boost::container::small_vector<std::pair<int64_t, std::size_t>, 8> collectives_reached;
  std::vector<std::pair<double, double>> compute_spans, communication_spans;
  // The compute stream is free from compute_free_s on; host_waits: the spans in which it could have
  // run its next op but for the host's issue of it.
  double compute_free_s = 0;
  std::vector<std::pair<double, double>> host_waits;
};

// The k-th collective of a group of ranks: the k-th communication op over that group of every rank of
// it. Groups are the ranks of the job that an op names (Op::ranks); the job's collectives and a group's
// that holds every rank are the same group.
int64_t group_key(const Op& op) {
  return int64_t{op.group_first} << 32 | int64_t{op.group_size} << 16 | op.group_stride;
}

struct Collective {
  OpKind kind = OpKind::wait;
  RankSet ranks;          // the group
  std::vector<OpId> ops;  // by rank in the group
  int reached = 0;
  std::vector<sg4::ActivityPtr> flows;  // in flight, in launch order
  std::size_t first_unfinished = 0;     // flows before it are done
  double tail_s = 0;
  double earliest_end_s = 0;  // its launch plus its latency-bound time (OpTimer::latency_bound_s)
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

// Whether a program's host waits for an op somewhere: then the host model runs even at no dispatch cost.
bool reads_scalars(const std::vector<Program>& programs) {
  for (const Program& program : programs)
    for (const Op& op : program.ops)
      if (op.host_waits) return true;
  return false;
}

// For each op of a rank, whether the next op of its compute stream can run straight after it: nothing
// but that op waits for its end (no communication or copy op depends on it, the host does not wait for
// it), and
// everything that op waits for is known to have ended by then: compute ops before it, and communication
// ops that an earlier compute op already waited for (the communication stream runs in order). Ops the
// host issues one at a time and waits for (a synchronous host) never chain.
std::vector<uint8_t> chains_into_next(const Program& program,
                                      const std::array<std::vector<OpId>, kStreamCount>& queue,
                                      bool synchronous_host) {
  const std::vector<Op>& ops = program.ops;
  std::vector<uint8_t> chains(ops.size(), 0);
  if (synchronous_host) return chains;
  std::vector<uint8_t> awaited_by_communication(ops.size(), 0);
  std::vector<int64_t> communication_position(ops.size(), -1);
  const std::vector<OpId>& communication = queue[static_cast<std::size_t>(Stream::communication)];
  for (std::size_t k = 0; k < communication.size(); ++k) {
    communication_position[communication[k]] = static_cast<int64_t>(k);
    for (OpId dep : ops[communication[k]].deps) awaited_by_communication[dep] = 1;
  }
  for (const OpId copy : queue[static_cast<std::size_t>(Stream::copy)])
    for (OpId dep : ops[copy].deps) awaited_by_communication[dep] = 1;
  const std::vector<OpId>& compute = queue[static_cast<std::size_t>(Stream::compute)];
  int64_t communication_ended = -1;  // the communication ops up to this position ended before this op
  for (std::size_t k = 0; k + 1 < compute.size(); ++k) {
    const Op& o = ops[compute[k]];
    for (OpId dep : o.deps) communication_ended = std::max(communication_ended, communication_position[dep]);
    const Op& next = ops[compute[k + 1]];
    if (o.kind == OpKind::wait || next.kind == OpKind::wait || o.host_waits ||
        awaited_by_communication[compute[k]])
      continue;
    chains[compute[k]] = std::all_of(next.deps.begin(), next.deps.end(), [&](OpId dep) {
      return communication_position[dep] <= communication_ended;
    });
  }
  return chains;
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
        host_(cluster.host.synchronous || cluster.host.dispatches_at_a_cost() || reads_scalars(programs)) {
    ranks_.resize(programs.size());
    for (std::size_t r = 0; r < programs.size(); ++r) {
      RankState& rank = ranks_[r];
      rank.program = &programs[r];
      const std::size_t n = programs[r].ops.size();
      rank.start.assign(n, kNotDone);
      rank.end.assign(n, kNotDone);
      for (OpId id = 0; id < n; ++id)
        rank.queue[static_cast<std::size_t>(programs[r].ops[id].stream)].push_back(id);
      rank.chains_on = chains_into_next(programs[r], rank.queue, timer_.synchronous_host());
      ops_left_ += n;
    }
    ops_total_ = ops_left_;
    dirty_.assign((programs.size() + 63) / 64, ~uint64_t{0});  // every rank may start its first ops
    if (programs.size() % 64 != 0) dirty_.back() = (uint64_t{1} << (programs.size() % 64)) - 1;
  }

  Execution execute() {
    origin_ = now_ = sg4::Engine::get_clock();
    if (host_)
      for (int r = 0; r < p_; ++r) {
        RankState& rank = ranks_[static_cast<std::size_t>(r)];
        rank.issue.assign(rank.start.size(), kNotDone);
        rank.issue_cost = timer_.issue_s(*rank.program);
        rank.host_time = origin_;
        rank.compute_free_s = origin_;
        advance_host(r);
      }
    for (uint64_t step = 0;; ++step) {
      start_ready_ops();
      if (ops_left_ == 0) break;
      if (options_.progress && step % 16 == 0)
        options_.progress("simulating", ops_total_ - ops_left_, ops_total_);
      const double next_timer =
          timers_.empty() ? std::numeric_limits<double>::infinity() : timers_.top().time;
      if (awaited_.empty()) {
        // No flow in flight: SimGrid has nothing to simulate until the next one starts (launch).
        PARADYSE_CHECK(!timers_.empty(), "the simulated programs wait on each other: " + stuck_ranks());
        now_ = next_timer;
      } else {
        const double timeout = std::isinf(next_timer) ? -1 : std::max(0.0, next_timer - now_);
        const ssize_t done = sg4::Activity::wait_any_for(awaited_, timeout);
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
        if (timer.rank >= 0 && timer.index == kWake)
          wake(timer.rank);
        else if (timer.rank >= 0 && op(timer.rank, static_cast<OpId>(timer.index)).kind == OpKind::host_copy)
          finish(timer.rank, static_cast<OpId>(timer.index), timer.time);
        else if (timer.rank >= 0)
          finish_compute(timer.rank, static_cast<OpId>(timer.index), timer.time);
        else
          finish_collective(timer.index, timer.time);
      }
    }
    catch_up_simgrid();
    return result();
  }

 private:
  const Op& op(int rank, OpId id) const { return ranks_[static_cast<std::size_t>(rank)].program->ops[id]; }

  // Starts every op that can start now, passing over the ranks in order until none can: a rank's
  // ops can start only after one of its ops ended, so each pass visits only the ranks marked since
  // (visiting all p ranks after every event made the executor O(p) per event). The ops start in the
  // order a pass over every rank would start them.
  void start_ready_ops() {
    for (int r = next_dirty(0); r >= 0; r = next_dirty(r + 1 < p_ ? r + 1 : 0)) {
      dirty_[static_cast<std::size_t>(r) / 64] &= ~(uint64_t{1} << (r % 64));
      for (Stream stream : {Stream::compute, Stream::communication, Stream::copy})
        while (try_start(r, stream)) {
        }
    }
  }

  // The first marked rank from `from` on, or else the first marked rank; −1 when none is marked.
  int next_dirty(int from) const {
    const std::size_t words = dirty_.size();
    for (std::size_t i = 0; i <= words; ++i) {
      const std::size_t w = (static_cast<std::size_t>(from) / 64 + i) % words;
      uint64_t bits = dirty_[w];
      if (i == 0) bits &= ~uint64_t{0} << (from % 64);  // the ranks before `from` in its word come last
      if (bits != 0) return static_cast<int>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits)));
    }
    return -1;
  }

  bool try_start(int r, Stream stream) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    const auto s = static_cast<std::size_t>(stream);
    if (rank.busy[s] || rank.head[s] == rank.queue[s].size()) return false;
    const OpId id = rank.queue[s][rank.head[s]];
    const Op& o = rank.program->ops[id];
    // Deps only ever become done, so the scan resumes where it last stopped: a blocked op is not
    // rescanned from its first dep at every visit of its rank.
    std::size_t& met = rank.deps_met[s];
    while (met < o.deps.size() && rank.end[o.deps[met]] != kNotDone) ++met;
    if (met < o.deps.size()) return false;
    if (host_ && !issued(r, stream, id)) return false;
    if (host_ && stream == Stream::compute) {
      double ready = rank.compute_free_s;
      for (OpId dep : o.deps) ready = std::max(ready, rank.end[dep]);
      if (rank.issue[id] > ready && now_ > ready) rank.host_waits.emplace_back(ready, now_);
    }
    met = 0;
    ++rank.head[s];
    rank.busy[s] = true;
    rank.start[id] = now_;
    if (o.kind == OpKind::wait) {
      finish(r, id, now_);
    } else if (o.kind == OpKind::host_copy) {
      set_timer(now_ + timer_.host_copy_s(o), r, id);  // over the GPU's own host link: no flows
    } else if (is_communication(o.kind)) {
      reach_collective(r, id);
    } else {
      start_chain(r, id);
    }
    return true;
  }

  // Starts compute op `id` now, and after it every compute op that can run straight after the one
  // before (chains_on) and that the host has issued: their ends are planned now, and one timer ends them.
  void start_chain(int r, OpId id) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    const std::vector<OpId>& queue = rank.queue[static_cast<std::size_t>(Stream::compute)];
    std::size_t& head = rank.head[static_cast<std::size_t>(Stream::compute)];
    rank.compute_op = id;
    rank.compute_since = now_;
    rank.compute_left_s = timer_.compute_s(op(r, id));
    rank.chain.assign(1, id);
    rank.chain_work_s.assign(1, rank.compute_left_s);
    for (OpId last = id; rank.chains_on[last] && head < queue.size(); ++head) {
      last = queue[head];
      if (host_ && last >= rank.host_next) break;  // not issued: the host waits for an op to end
      rank.chain.push_back(last);
      rank.chain_work_s.push_back(timer_.compute_s(op(r, last)));
    }
    kernels_ += rank.chain.size();
    plan_chain(r);
  }

  // The chain's starts and ends at the present rate, and the timer for its end.
  void plan_chain(int r) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    const std::size_t n = rank.chain.size();
    rank.chain_start.resize(n);
    rank.chain_end.resize(n);
    double end = rank.compute_since + rank.compute_left_s / (1 - rank.contention);
    rank.chain_start[0] = rank.compute_since;
    rank.chain_end[0] = end;
    for (std::size_t i = 1; i < n; ++i) {
      const double start = host_ ? std::max(end, rank.issue[rank.chain[i]]) : end;
      end = start + rank.chain_work_s[i] / (1 - rank.contention);
      rank.chain_start[i] = start;
      rank.chain_end[i] = end;
    }
    rank.compute_end = end;
    set_timer(end, r, rank.chain.back());
  }

  // Chain op i (> 0) starts at its planned time, the one before it having ended: as try_start
  // starts an op, counting the time it waited for the host's issue.
  void begin_chain_op(int r, std::size_t i) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    const OpId id = rank.chain[i];
    const double start = rank.chain_start[i];
    rank.start[id] = start;
    if (!host_) return;
    double ready = rank.compute_free_s;
    for (OpId dep : op(r, id).deps) ready = std::max(ready, rank.end[dep]);
    if (rank.issue[id] > ready && start > ready) rank.host_waits.emplace_back(ready, start);
  }

  // Ends the chain's first `count` ops at their planned times.
  void end_chain_ops(int r, std::size_t count) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < count; ++i) {
      if (i > 0) begin_chain_op(r, i);
      finish(r, rank.chain[i], rank.chain_end[i]);
    }
  }

  // Rank r's compute runs at 1 − `contention` from now on: the chain's ops that ended by now end,
  // and the rest is planned again from the op running (or next to start).
  void contend(int r, double contention) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    if (contention == rank.contention) return;
    if (rank.compute_op != kNoOp) {
      std::size_t ended = 0;
      while (ended < rank.chain.size() && rank.chain_end[ended] <= now_) ++ended;
      if (ended > 0) {
        end_chain_ops(r, ended);
        const auto erase_front = [ended](auto& values) {
          values.erase(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(ended));
        };
        erase_front(rank.chain);
        erase_front(rank.chain_work_s);
        erase_front(rank.chain_start);
        erase_front(rank.chain_end);
        if (rank.chain.empty()) {
          rank.compute_op = kNoOp;  // the chain's timer is stale
        } else {
          rank.busy[static_cast<std::size_t>(Stream::compute)] = true;
          begin_chain_op(r, 0);
          rank.compute_op = rank.chain[0];
          rank.compute_since = rank.chain_start[0];
          rank.compute_left_s = rank.chain_work_s[0];
        }
      }
    }
    if (rank.compute_op != kNoOp && rank.compute_since <= now_) {
      rank.compute_left_s =
          std::max(0.0, rank.compute_left_s - (now_ - rank.compute_since) * (1 - rank.contention));
      rank.compute_since = now_;
    }
    rank.contention = contention;
    if (rank.compute_op != kNoOp) plan_chain(r);
  }

  void set_timer(double time, int rank, std::size_t index) { timers_.push({time, sequence_++, rank, index}); }

  // Issues rank r's ops in program order, each at its dispatch cost after the previous, until the
  // host must wait for an op to end (a read_scalar, or any compute-stream op on a synchronous host).
  void advance_host(int r) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    const std::vector<Op>& ops = rank.program->ops;
    while (rank.host_next < ops.size()) {
      if (rank.host_blocked_on != kNoOp) {
        if (rank.end[rank.host_blocked_on] == kNotDone) return;
        rank.host_time = std::max(rank.host_time, rank.end[rank.host_blocked_on]);
        rank.host_blocked_on = kNoOp;
      }
      const OpId id = rank.host_next++;
      rank.host_time += rank.issue_cost[id];
      rank.issue[id] = rank.host_time;
      if (ops[id].host_waits || (timer_.synchronous_host() && ops[id].stream == Stream::compute))
        rank.host_blocked_on = id;
    }
  }

  // Whether the host has issued op `id` by now; if it will later, a wake-up is set for then.
  bool issued(int r, Stream stream, OpId id) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    if (id >= rank.host_next) return false;  // the blocking op's end issues it
    if (rank.issue[id] <= now_) return true;
    bool& wake_set = rank.wake_set[static_cast<std::size_t>(stream)];
    if (!wake_set) set_timer(rank.issue[id], r, kWake);
    wake_set = true;
    return false;
  }

  void wake(int r) {
    ranks_[static_cast<std::size_t>(r)].wake_set = {};
    dirty_[static_cast<std::size_t>(r) / 64] |= uint64_t{1} << (r % 64);
  }

  void finish(int r, OpId id, double time) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    const Op& o = rank.program->ops[id];
    rank.end[id] = time;
    rank.busy[static_cast<std::size_t>(o.stream)] = false;
    if (o.stream == Stream::compute) rank.compute_free_s = time;
    if (id == rank.host_blocked_on) advance_host(r);
    dirty_[static_cast<std::size_t>(r) / 64] |= uint64_t{1} << (r % 64);
    --ops_left_;
    if (is_communication(o.kind))
      rank.communication_spans.emplace_back(rank.start[id], time);
    else if (o.stream == Stream::compute && o.kind != OpKind::wait)
      rank.compute_spans.emplace_back(rank.start[id], time);
  }

  void finish_compute(int r, OpId id, double time) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    // A stale timer: the rate changed since it was set.
    if (rank.compute_op == kNoOp || id != rank.chain.back() || time != rank.compute_end) return;
    rank.compute_op = kNoOp;
    end_chain_ops(r, rank.chain.size());
  }

  void reach_collective(int r, OpId id) {
    RankState& rank = ranks_[static_cast<std::size_t>(r)];
    const Op& o = op(r, id);
    const int64_t key = group_key(o);
    auto reached = std::find_if(rank.collectives_reached.begin(), rank.collectives_reached.end(),
                                [key](const auto& group) { return group.first == key; });
    if (reached == rank.collectives_reached.end())
      reached = rank.collectives_reached.insert(rank.collectives_reached.end(), {key, 0});
    const std::size_t k = reached->second++;
    std::vector<std::size_t>& of_group = group_collectives_[key];
    if (k == of_group.size()) {
      const RankSet ranks = o.ranks();
      PARADYSE_CHECK(ranks.within(p_) && ranks.holds(r), "rank " + std::to_string(r) +
                                                             " in a collective of " + to_string(ranks) +
                                                             " of " + std::to_string(p_));
      of_group.push_back(collectives_.size());
      Collective& created = collectives_.emplace_back();
      created.ranks = ranks;
      created.ops.assign(static_cast<std::size_t>(o.group_size), kNoOp);
    }
    const std::size_t index = of_group[k];
    Collective& c = collectives_[index];
    if (c.reached == 0) c.kind = o.kind;
    PARADYSE_CHECK(o.kind == c.kind,
                   "collective " + std::to_string(k) + " of its group is a " +
                       std::string(to_string(o.kind)) + " on rank " + std::to_string(r) + " but a " +
                       std::string(to_string(c.kind)) +
                       " elsewhere: ranks must issue the same collectives in the same order");
    c.ops[static_cast<std::size_t>((r - c.ranks.first) / c.ranks.stride)] = id;
    if (++c.reached == static_cast<int>(c.ops.size())) launch(index);
  }

  void launch(std::size_t k) {
    Collective& c = collectives_[k];
    const int size = static_cast<int>(c.ops.size());
    std::vector<const Op*> ops;
    for (int i = 0; i < size; ++i) ops.push_back(&op(c.ranks.rank(i), c.ops[static_cast<std::size_t>(i)]));
    const Op& o = *ops.front();
    if (const double contention = timer_.compute_contention(o); contention > 0)
      for (int i = 0; i < size; ++i) contend(c.ranks.rank(i), contention);
    if (costmodel::flow_count(o, size, cluster_) >
        static_cast<std::size_t>(options_.max_flows_per_collective)) {
      ++analytic_collectives_;
      set_timer(now_ + timer_.communication_s(o), -1, k);
      return;
    }
    const costmodel::CollectiveFlows plan = costmodel::collective_flows(ops, cluster_);
    if (!plan.flows.empty()) catch_up_simgrid();
    const hw::FabricSpec& fabric = cluster_.fabric_of(c.ranks.first, size, c.ranks.stride);
    const double efficiency = costmodel::flow_efficiency(o, size, fabric, cluster_);
    c.tail_s = std::max(0, plan.latency_hops - 1) * fabric.hop_latency_s() + fabric.synchronization_s;
    c.earliest_end_s = now_ + timer_.latency_bound_s(o) + fabric.synchronization_s;
    c.flows.reserve(plan.flows.size());
    for (const costmodel::Flow& flow : plan.flows) {
      const auto bytes = static_cast<uint64_t>(std::max(1.0, std::round(flow.bytes / efficiency)));
      c.flows.push_back(sg4::Comm::sendto_async(platform_.gpu(c.ranks.rank(flow.from)),
                                                platform_.gpu(c.ranks.rank(flow.to)), bytes));
    }
    flows_ += plan.flows.size();
    if (plan.flows.empty()) {
      end_collective(k);
      return;
    }
    awaited_.push_back(c.flows.front());
    awaited_collective_.push_back(k);
  }

  // SimGrid's clock to now_, where the executor moved on without it while no flow was in flight.
  void catch_up_simgrid() const {
    if (sg4::Engine::get_clock() < now_) sg4::this_actor::sleep_until(now_);
  }

  // awaited_[i], the first unfinished flow of its collective, has arrived. The collective ends when
  // its last flow arrives: await its next unfinished flow, skipping those that arrived meanwhile
  // (each flow is tested once as finished, so a collective of n flows costs O(n) tests in all).
  void flow_done(std::size_t i) {
    const std::size_t k = awaited_collective_[i];
    Collective& c = collectives_[k];
    ++c.first_unfinished;
    while (c.first_unfinished < c.flows.size() && c.flows[c.first_unfinished]->test()) ++c.first_unfinished;
    if (c.first_unfinished < c.flows.size()) {
      awaited_[i] = c.flows[c.first_unfinished];
      return;
    }
    awaited_[i] = awaited_.back();
    awaited_.pop_back();
    awaited_collective_[i] = awaited_collective_.back();
    awaited_collective_.pop_back();
    c.flows = {};
    end_collective(k);
  }

  // Its flows are done: it ends after its tail, and no sooner than its latency-bound time allows.
  void end_collective(std::size_t k) {
    const Collective& c = collectives_[k];
    const double end_s = std::max(now_ + c.tail_s, c.earliest_end_s);
    if (end_s > now_)
      set_timer(end_s, -1, k);
    else
      finish_collective(k, now_);
  }

  void finish_collective(std::size_t k, double time) {
    const Collective& c = collectives_[k];
    for (std::size_t i = 0; i < c.ops.size(); ++i) {
      const int r = c.ranks.rank(static_cast<int>(i));
      contend(r, 0);
      finish(r, c.ops[i], time);
    }
  }

  std::string stuck_ranks() const {
    std::string text;
    for (int r = 0; r < p_; ++r) {
      const RankState& rank = ranks_[static_cast<std::size_t>(r)];
      for (std::size_t s = 0; s < kStreamCount; ++s)
        if (rank.head[s] < rank.queue[s].size()) {
          const Op& o = op(r, rank.queue[s][rank.head[s]]);
          constexpr std::array<const char*, kStreamCount> kNames{"compute", "communication", "copy"};
          text += "rank " + std::to_string(r) + " " + kNames[s] + " stream at " +
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
      out.host_bound_s = uncovered_s(rank.host_waits, rank.communication_spans);
      out.idle_s = std::max(0.0, e.seconds - out.compute_s - out.exposed_comm_s - out.host_bound_s);
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
  const bool host_;  // the cluster's host costs time: ops wait for their issue

  std::vector<RankState> ranks_;
  std::vector<Collective> collectives_;
  std::unordered_map<int64_t, std::vector<std::size_t>> group_collectives_;  // by group_key, in order
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  // One flow per collective in flight, the first not known to have arrived, and its collective:
  // waiting on every flow in flight instead costs SimGrid O(flows in flight) per arrival, which grew
  // with the square of the degree.
  std::vector<sg4::ActivityPtr> awaited_;
  std::vector<std::size_t> awaited_collective_;
  double origin_ = 0, now_ = 0;
  std::size_t ops_left_ = 0, ops_total_ = 0;
  std::vector<uint64_t> dirty_;  // bit r: rank r had an op end since it was last visited
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
