// The communicator groups of a job's Chakra traces: which ranks each collective's `pg_name` names.
// ASTRA-sim reads them from a JSON file (its --comm-group-file), {"<id>": [rank, ...], ...}, where
// ids are whole numbers and "0" (or no pg_name) stands for every rank. paradyse's groups are evenly
// spaced ranks (RankSet), so a file read here must hold only those.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "program/backend.hpp"
#include "program/program.hpp"

namespace paradyse::chakra {

struct CommGroups {
  std::map<int, RankSet> by_id;  // ids ≥ 1

  // The id of `ranks`; 0 when it has none.
  int id_of(const RankSet& ranks) const;
};

// Every group that an op of `programs` communicates over, numbered from 1 in the order rank 0's ops,
// then rank 1's, … first name them.
CommGroups comm_groups_of(const std::vector<Program>& programs);

// {"1": [0, 1, 2, 3], ...}, one group per line.
std::string comm_groups_json(const CommGroups& groups);

// The file's groups, each checked against a job of `ranks` ranks ("0", every rank, is skipped).
// InputError naming `path` and the id for anything else than an object of whole-number ids to distinct
// ranks in [0, ranks), in increasing order and evenly spaced.
CommGroups read_comm_groups(const std::string& path, int ranks);

}  // namespace paradyse::chakra
