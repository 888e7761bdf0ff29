#include "evaluation/sweep.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "common/atomic_file.hpp"
#include "common/child_processes.hpp"
#include "common/csv.hpp"
#include "common/errors.hpp"
#include "common/output_lock.hpp"
#include "evaluation/gnuplot.hpp"
#include "evaluation/tuned_statics.hpp"

namespace paradyse::evaluation {
namespace {

namespace fs = std::filesystem;
using OrderedJson = nlohmann::ordered_json;

bool under_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
}

OrderedJson run_point(const SweepSpec& spec, const SweepPoint& point) {
  const CompareJobResult run = run_compare_job(spec.job(point));
  OrderedJson row;
  row["point"] = point.index;
  row["id"] = point.id;
  for (const auto& [axis, value] : point.values.items()) row[axis] = value;
  row["policies"] = OrderedJson::object();
  for (const PolicyResult& p : run.result.policies)
    row["policies"][p.policy] = {{"total_time_s", p.total_s},
                                 {"tokens_per_s", p.tokens_per_second},
                                 {"mfu", p.mfu},
                                 {"oom_count", p.oom_count},
                                 {"max_len_before_oom", p.max_len_before_oom}};
  const PolicyResult* best = best_static(run.result);
  row["best_static"] = best != nullptr ? best->policy : "";
  for (const PolicyResult& p : run.result.policies) {
    if (p.policy != "paradyse" && p.policy != "optimal") continue;
    const auto [static_s, seconds] =
        best != nullptr ? common_time_s(run.result, *best, p) : std::pair{0.0, 0.0};
    // Left out where no static trains anything both train: the sweep's table then says "-".
    if (seconds > 0) row["speedup_" + p.policy] = static_s / seconds;
  }
  // The best group policy over the same static, on the steps both train whole.
  for (const Speedup& speedup : group_speedups(run.result))
    if (best != nullptr && speedup.baseline == best->policy) {
      row["best_group"] = speedup.policy;
      row["speedup_groups"] = speedup.common_speedup;
    }
  // With tuned statics, the same policies over the fastest tuned static, on the steps both train whole.
  if (const PolicyResult* tuned = fastest_tuned_static(run.result, run.description.micro_batch_tokens)) {
    row["fastest_tuned_static"] = tuned->policy;
    const std::pair<std::string, const char*> reported[] = {
        {"paradyse", "speedup_tuned_paradyse"},
        {"optimal", "speedup_tuned_optimal"},
        {row.value("best_group", ""), "speedup_tuned_groups"}};
    for (const auto& [policy, key] : reported)
      for (const PolicyResult& p : run.result.policies)
        if (p.policy == policy)
          if (const Speedup over = speedup(run.result, p, *tuned, ""); over.common_steps > 0)
            row[key] = over.common_speedup;
  }
  return row;
}

void append_row(const fs::path& file, const OrderedJson& row) {
  const std::string line = row.dump() + "\n";
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    throw InputError(file.string(), 0, "", "cannot append a row");
  ::close(fd);
}

// A sweep killed while a point appended its row can leave a last line without its end: it is dropped
// (its point runs again), so that the next row starts on a line of its own.
void drop_torn_last_line(const fs::path& file) {
  if (!fs::exists(file)) return;
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty() || text.back() == '\n') return;
  const std::size_t last_end = text.rfind('\n');
  fs::resize_file(file, last_end == std::string::npos ? 0 : last_end + 1);
}

// Finished rows by point; a line cut short by a kill is ignored (its point runs again).
std::map<int, OrderedJson> read_rows(const fs::path& file) {
  std::map<int, OrderedJson> rows;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const OrderedJson row = OrderedJson::parse(line, nullptr, false);
    if (row.is_discarded() || !row.contains("point")) continue;
    rows.emplace(row.at("point").get<int>(), row);
  }
  return rows;
}

void run_in_processes(const SweepSpec& spec, const std::vector<const SweepPoint*>& points,
                      const fs::path& rows_file, int jobs) {
  ChildProcesses children;  // killed with the sweep, so a stopped sweep leaves no point running
  std::vector<std::string> failed;
  std::size_t next = 0;
  while (next < points.size() || children.running() > 0) {
    while (failed.empty() && next < points.size() && children.running() < jobs) {
      const SweepPoint* point = points[next];
      children.start(static_cast<int>(next++), [&] {
        try {
          append_row(rows_file, run_point(spec, *point));
          return 0;
        } catch (const std::exception& e) {
          fmt::print(stderr, "paradyse: point {} ({}): {}\n", point->index, point->id, e.what());
          return 2;
        }
      });
    }
    const auto ended = children.wait_next();
    if (ended && ended->status != 0) failed.push_back(points[static_cast<std::size_t>(ended->id)]->id);
  }
  if (!failed.empty())
    throw InputError(spec.path, 0, "",
                     "points failed: " + failed.front() + (failed.size() > 1 ? " and others" : ""));
}

// Rank k runs points k, k + size, ... (each in its own process, as without MPI); rank 0 gathers
// every rank's rows.
std::vector<OrderedJson> run_under_mpi(const SweepSpec& spec, const std::vector<const SweepPoint*>& missing,
                                       const fs::path& rows_file, int rank, int size) {
  std::vector<const SweepPoint*> share;
  for (std::size_t i = static_cast<std::size_t>(rank); i < missing.size();
       i += static_cast<std::size_t>(size))
    share.push_back(missing[i]);
  run_in_processes(spec, share, rows_file, 1);
  const std::map<int, OrderedJson> rows = read_rows(rows_file);
  std::string mine;
  for (const SweepPoint* point : share) mine += rows.at(point->index).dump() + "\n";
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[static_cast<std::size_t>(r)] = total;
    total += lengths[static_cast<std::size_t>(r)];
  }
  std::string all(static_cast<std::size_t>(rank == 0 ? total : 0), '\0');
  MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  std::vector<OrderedJson> gathered;
  std::istringstream in(all);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) gathered.push_back(OrderedJson::parse(line));
  return gathered;
}

// A JSON value as a CSV field: a string as its text, a number as JSON writes it, null as empty.
std::string csv_cell(const OrderedJson& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

// Bars per point: the speedups, and the longest sequence each policy trained before its first out of
// memory. The points are named on the x axis by their ids.
void plot(const std::vector<OrderedJson>& rows, const std::vector<std::string>& policies,
          const fs::path& dir) {
  std::string tics = "set xtics rotate by -20 (";
  std::string paradyse, optimal, groups;
  std::vector<std::string> longest(policies.size());
  bool any_trained = false;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const OrderedJson& row = rows[i];
    tics += fmt::format("{}{} {}", i == 0 ? "" : ", ", gnuplot::quoted(row.at("id").get<std::string>()), i);
    paradyse += fmt::format("{}\n", row.value("speedup_paradyse", 0.0));
    optimal += fmt::format("{}\n", row.value("speedup_optimal", 0.0));
    groups += fmt::format("{}\n", row.value("speedup_groups", 0.0));
    for (std::size_t p = 0; p < policies.size(); ++p) {
      const OrderedJson& cell = row.at("policies").contains(policies[p])
                                    ? row.at("policies").at(policies[p]).at("max_len_before_oom")
                                    : OrderedJson(0);
      longest[p] += fmt::format("{}\n", cell.get<int64_t>());
      any_trained = any_trained || cell.get<int64_t>() > 0;
    }
  }
  // On a log axis, bars of 0 are points gnuplot cannot place; with none above 0 the plot says so.
  if (!any_trained) std::fill(longest.begin(), longest.end(), std::string());
  tics += ")";
  gnuplot::Plot speedup{
      .png = dir / "speedup.png",
      .height_px = 650,
      .settings = {"set grid", "set key outside right", tics, "set style data histograms",
                   "set style histogram clustered gap 1", "set style fill solid 0.8 border -1",
                   "set boxwidth 0.9", "set yrange [0:*]",
                   "set title 'speedup over the static strategy that trains the most sequences'",
                   "set ylabel 'speedup (x)'"},
      .series = {{paradyse, "1", "lw 2", "paradyse"}, {optimal, "1", "lw 2", "optimal"}}};
  if (std::any_of(rows.begin(), rows.end(),
                  [](const OrderedJson& row) { return row.contains("speedup_groups"); }))
    speedup.series.push_back({groups, "1", "lw 2", "best group policy"});
  gnuplot::Plot longest_plot{
      .png = dir / "longest.png",
      .height_px = 650,
      .settings = {"set logscale y 2", "set yrange [1024:*]",
                   "set ytics ('1K' 1024, '4K' 4096, '16K' 16384, '64K' 65536, '256K' 262144, '1M' 1048576, "
                   "'4M' 4194304, '16M' 16777216)",
                   "set title 'longest sequence trained before the first out of memory'",
                   "set ylabel 'tokens'"}};
  for (std::size_t p = 0; p < policies.size(); ++p)
    longest_plot.series.push_back({longest[p], "1", "lw 2", policies[p]});
  gnuplot::draw({speedup, longest_plot}, dir / "plot-data");
}

// A row's baselines and speedups, the CSV's columns after the axes.
const std::vector<std::string> kSpeedupKeys = {
    "best_static",         "speedup_paradyse",     "speedup_optimal",        "best_group",
    "speedup_groups",      "fastest_tuned_static", "speedup_tuned_paradyse", "speedup_tuned_optimal",
    "speedup_tuned_groups"};

void write_outputs(const SweepSpec& spec, const std::vector<OrderedJson>& rows, const fs::path& dir) {
  std::vector<std::string> policies;
  for (const OrderedJson& row : rows)
    for (const auto& [policy, values] : row.at("policies").items())
      if (std::find(policies.begin(), policies.end(), policy) == policies.end()) policies.push_back(policy);
  const std::vector<std::string> fields = {"total_time_s", "tokens_per_s", "mfu", "oom_count",
                                           "max_len_before_oom"};
  std::vector<std::string> header = {"point", "id"};
  header.insert(header.end(), spec.axes.begin(), spec.axes.end());
  header.insert(header.end(), kSpeedupKeys.begin(), kSpeedupKeys.end());
  for (const std::string& p : policies)
    for (const std::string& f : fields) header.push_back(p + "." + f);
  std::string csv = csv::row(header);
  for (const OrderedJson& row : rows) {
    std::vector<std::string> cells = {csv_cell(row.at("point")), csv_cell(row.at("id"))};
    for (const std::string& axis : spec.axes) cells.push_back(csv_cell(row.at(axis)));
    for (const std::string& key : kSpeedupKeys) cells.push_back(csv_cell(row.value(key, OrderedJson())));
    for (const std::string& p : policies)
      for (const std::string& f : fields)
        cells.push_back(row.at("policies").contains(p) ? csv_cell(row.at("policies").at(p).at(f)) : "");
    csv += csv::row(cells);
  }
  // The plots first: the tables appear, whole, only once everything else has been drawn.
  plot(rows, policies, dir);
  write_file_atomically((dir / "sweep.csv").string(), [&](std::ostream& out) { out << csv; });
  write_file_atomically((dir / "sweep.json").string(), [&](std::ostream& out) {
    out << OrderedJson{{"spec", spec.path}, {"axes", spec.axes}, {"rows", rows}}.dump(2) << "\n";
  });
}

}  // namespace

SweepRun run_sweep(const SweepSpec& spec, const std::string& out, int jobs) {
  if (jobs < 1) throw InputError("--jobs", 0, "", "expected a positive count");
  const fs::path dir(out), rows_file = dir / "rows.jsonl", spec_file = dir / "spec.json";

  const bool mpi = under_mpirun();
  int rank = 0, size = 1;
  if (mpi) {
    MPI_Init(nullptr, nullptr);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  std::optional<OutputLock> lock;  // rank 0 writes the folder; one sweep at a time
  if (rank == 0) {
    lock.emplace(out, "--out");
    fs::create_directories(dir);
    drop_torn_last_line(rows_file);
    if (fs::exists(spec_file)) {
      std::ifstream in(spec_file);
      const std::string earlier((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (earlier != spec.text)
        throw InputError("--out", 0, "", "'" + out + "' holds a sweep of another spec; give a new folder");
    } else {
      std::ofstream(spec_file) << spec.text;
    }
  }
  if (mpi) MPI_Barrier(MPI_COMM_WORLD);
  const std::map<int, OrderedJson> done = read_rows(rows_file);
  std::vector<const SweepPoint*> missing;
  for (const SweepPoint& point : spec.points)
    if (!done.contains(point.index)) missing.push_back(&point);
  // Every rank shares out the same missing points: none appends a row before all have read them (a
  // rank that read after another's first row would skip that point in its count and run another's).
  if (mpi) MPI_Barrier(MPI_COMM_WORLD);

  SweepRun run;
  run.run_now = static_cast<int>(missing.size());
  run.mpi_ranks = mpi ? size : 0;
  std::vector<OrderedJson> gathered;
  if (mpi)
    gathered = run_under_mpi(spec, missing, rows_file, rank, size);
  else
    run_in_processes(spec, missing, rows_file, jobs);
  if (mpi) MPI_Finalize();
  if (rank != 0) return run;

  std::map<int, OrderedJson> rows = read_rows(rows_file);
  for (const OrderedJson& row : gathered)
    if (rows.emplace(row.at("point").get<int>(), row).second) append_row(rows_file, row);
  for (const SweepPoint& point : spec.points) {
    const auto found = rows.find(point.index);
    if (found == rows.end()) throw InternalError("point " + point.id + " has no row");
    run.rows.push_back(found->second);
  }
  write_outputs(spec, run.rows, dir);
  return run;
}

}  // namespace paradyse::evaluation
