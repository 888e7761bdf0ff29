// A sweep: a compare run at every point of a spec's grid (sweep_spec.hpp). Rows are appended to
// rows.jsonl as each point finishes (one write each, O_APPEND), so an interrupted sweep restarted with
// the same spec and folder runs only the points missing. Every point runs in a process of its own,
// forked (`jobs` at once), so that its simulations see a fresh simulator whichever way the sweep is
// run and give the same numbers; started under mpirun, ranks share the points out (point k to rank
// k mod size) and rank 0 gathers every rank's rows and writes sweep.csv, sweep.json and the plots.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluation/sweep_spec.hpp"

namespace paradyse::evaluation {

struct SweepRun {
  std::vector<nlohmann::ordered_json> rows;  // rank 0: one per point, in the spec's order; else empty
  int run_now = 0;                           // points run by this call (all ranks')
  int mpi_ranks = 0;                         // 0 when not under mpirun
};

// Runs the points of `spec` that `dir` lacks and, on rank 0, writes the sweep's outputs into `dir`.
// InputError when `dir` holds a sweep of another spec, or when a point fails.
SweepRun run_sweep(const SweepSpec& spec, const std::string& dir, int jobs);

}  // namespace paradyse::evaluation
