// One compare run from its options: the trace loaded and prepared, the policies built, every
// sequence timed by the engine. What `paradyse compare` runs, and what `paradyse sweep` runs per point.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "evaluation/compare.hpp"
#include "evaluation/compare_report.hpp"
#include "evaluation/group_compare.hpp"
#include "traces/prepare.hpp"
#include "traces/trace.hpp"

namespace paradyse::evaluation {

struct CompareJob {
  MachineOptions machine;
  PolicyOptions policies;
  std::optional<hw::ClusterSpec> cluster;  // replaces machine's cluster when set
  std::string trace = "github-code-like";
  std::string column = "length";
  std::string field = "length";
  std::string order = "dataset";
  uint64_t seed = 0;
  std::string max_len = "0";  // a length as parse_length reads it (16K), or 0: no cap
  std::string over = "drop";
  int64_t limit = 0;
  double sample = 1;
  std::string engine = "sim";
  double grid_ratio = 1.05;
  int64_t global_batch = 1;  // sequences a step, each its own micro-batch
  // Packed training (traces/packing.hpp), lengths as parse_length reads them ("1M"); "0": not packed.
  std::string global_batch_tokens = "0";
  std::string micro_batch_tokens = "0";
  std::vector<int64_t> lengths;  // when not empty: these lengths instead of a trace
  // Group policies (group_compare.hpp), comma-separated, run after `policies` on the same global
  // batches; they need packed training.
  std::string group_policies;
  std::vector<int> group_sizes;     // the degrees their groups may have; empty: every power of two
  std::string shard_group = "job";  // what their weights are sharded over (parse_shard_group)
  // What their gradients are reduced in (parse_gradient_reduce_dtype).
  std::string gradient_reduce_dtype = "bf16";
  // Packed training: micro-batch budgets, comma-separated, at which every static policy runs again
  // (tuned_statics.hpp); "": none.
  std::string tune_budgets;
  int jobs = 1;  // simulations run at once, each in its own process (SimulatedTimes)
  // The run is timed a run of whole steps at a time, about this many micro-batches each: every
  // policy's decisions and results for them are held at once (a few hundred bytes each), and the
  // simulations they need run together. The bundled traces fit in one.
  int64_t chunk_micro_batches = int64_t{1} << 18;
};

// The job's trace, opened and prepared (order, cap, sample, limit), every flag checked; a plain-text
// trace file is read as the run goes, not held (traces::PreparedLengths).
struct JobTrace {
  std::shared_ptr<const traces::TraceSource> trace;
  std::shared_ptr<const traces::PreparedLengths> prepared;
  bool sorted = false;
};
JobTrace load_job_trace(const CompareJob& job);

// InputError naming --engine unless it is sim or analytic.
void check_engine(const std::string& engine);

struct CompareJobResult {
  CompareResult result;
  RunDescription description;
};

// A job whose every input is checked: its trace prepared, its policies built, its steps laid out.
struct CheckedCompareJob {
  JobTrace trace;
  PolicySet set;
  std::vector<GroupPolicy> group_policies;
  int shard_degree = 0;
  DType gradient_reduce_dtype = DType::bf16;
  int64_t global_batch = 1;         // sequences a step, when not packed
  int64_t global_batch_tokens = 0;  // 0: not packed
  int64_t micro_batch_tokens = 0;
  std::vector<int64_t> tune_budgets;  // ascending, without micro_batch_tokens
  int64_t quantum = 1;                // a document is padded to a multiple of it
  // What the run's schedule holds: its micro-batches, and, packed, the tokens of its largest step (from
  // a pass over the steps that kept none of them; 0 unpacked, where group policies cannot run).
  int64_t micro_batches = 0;
  int64_t largest_step_tokens = 0;
  int64_t chunk_micro_batches = 0;
  // A builder of the job's steps (packed or not), empty; packed into micro-batches of
  // `micro_batch_budget` tokens when given.
  traces::ScheduleBuilder schedule_builder(int64_t micro_batch_budget = 0) const;
};
// Checks every input, computing nothing that takes time: InputError naming the flag or file. A
// sweep checks all its points with it before it runs one.
CheckedCompareJob check_compare_job(const CompareJob& job);

// check_compare_job, then every step timed by the engine, a run of whole steps at a time, each
// micro-batch's result also given to `sink`.
CompareJobResult run_compare_job(const CompareJob& job, const Progress& progress = {},
                                 SequenceSink* sink = nullptr);

}  // namespace paradyse::evaluation
