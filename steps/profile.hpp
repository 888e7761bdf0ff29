// The profile dataset: measured iteration time, peak memory and saved activations of uniform plans
// (every layer the same strategy and recompute) at several sequence lengths, for one model on one
// cluster at one degree and batch. It is what the learned cost model (learned_model.hpp) is fitted on,
// so it is kept as a plain CSV that a simulator run, the analytic model or a real run can write alike.
//
// CSV format: a header row, exactly (one line, wrapped here)
//   model,cluster,degree,batch,source,strategy,recompute,seq,
//   iteration_time_s,peak_memory_bytes,saved_bytes_per_layer
// then one row per point. model, cluster, degree, batch and source are the same on every row (one file
// = one profile); source is sim, analytic or real; recompute is none, selective or full; (strategy,
// recompute, seq) appears once. Numbers are written in their shortest exact form (std::to_chars), so
// write then read gives back the same doubles bit for bit. Fields are RFC 4180 (common/csv.hpp): a name
// holding a comma, a quote or a line break is quoted, so any non-empty name reads back. An example row:
//   gpt-8l,dgx-a100,8,1,sim,megatron_ts,none,4096,0.3125,21474836480,402653184
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace paradyse::steps {

// One measured (strategy, length) of a uniform plan: every layer the same strategy and recompute.
struct ProfilePoint {
  std::string strategy;            // strategy name, e.g. "megatron_ts"
  std::string recompute = "none";  // none | selective | full
  int64_t seq = 0;                 // requested tokens per sequence
  double iteration_time_s = 0;
  double peak_memory_bytes = 0;
  double saved_bytes_per_layer = 0;  // activations one layer keeps from its forward to its backward
};

struct Profile {
  std::string model;    // model name, e.g. "gpt-8l"
  std::string cluster;  // cluster name, e.g. "dgx-a100" or "dgx-a100 x2"
  int degree = 0;
  int64_t batch = 1;
  std::string source;  // what measured it: "sim", "analytic" or "real"
  std::vector<ProfilePoint> points;
};

// Whether `text` names what measured a profile: "sim", "analytic" or "real".
bool is_profile_source(std::string_view text);

// Writes the CSV. An empty name or a value that reading would reject is an InputError naming the
// field, so nothing unreadable is written.
void write_profile(const Profile& profile, std::ostream& out);
// Writes to path + ".partial" and renames it to path at the end, so a failed run leaves no half file.
void write_profile(const Profile& profile, const std::string& path);

// Strict: a wrong header, a wrong column count, a non-numeric or non-positive number, an unknown
// recompute or source, a row whose model/cluster/degree/batch/source differ from the first row, a
// duplicate (strategy, recompute, seq), or an empty file is an InputError(path, line, column, ...).
Profile read_profile(const std::string& path);

}  // namespace paradyse::steps
