// Chakra execution traces (one file per rank, <prefix>.<rank>.et, and a comm-group file) read back as
// paradyse programs, for the simulator to run on a cluster (sim::Simulator::run).
//
// Nodes become ops in a topological order of their data and control dependencies (the file's order
// where it is one), each depending on the ops its dependencies became. COMP_NODEs run on the compute
// stream for their recorded duration (paradyse.duration_s where paradyse wrote it, else
// duration_micros), or with price_compute for what paradyse prices them at on the cluster's GPU: a node
// paradyse wrote by its kind and shape, any other as a square GEMM of its num_ops FLOPs or a pass over
// its tensor_size bytes, whichever is slower (a memory-bound pass when it has no FLOPs). COMM_COLL_NODEs
// are collectives of their comm_type over their pg_name's group (none, or "0": every rank);
// COMM_SEND_NODEs and COMM_RECV_NODEs become paradyse's transfers: a send followed by a receive of
// the same group and tag is one exchange (a ring's step, as paradyse writes them), any other a
// transfer over the group of its two ranks. Collectives and transfers run as paradyse's flows on the
// cluster's topology. Other node types are refused.
//
// Every error is an InputError naming the file, and the node by its index in the file ("node[12]").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chakra/comm_groups.hpp"
#include "program/program.hpp"

namespace paradyse::chakra {

struct ImportOptions {
  bool price_compute = false;  // price compute nodes on the cluster instead of taking their durations
};

// One rank's file.
struct RankTrace {
  Program program;
  std::vector<uint32_t> node_of_op;  // the index in the file of each op's (first) node
  double static_bytes = 0;           // the metadata's paradyse.static_bytes, or 0
  std::string description;           // the metadata's paradyse.description, or ""
};

// "node[12]": how errors name a node, by its index in the file.
std::string node_field(std::size_t index);

// Rank `rank` of a job of `ranks`, from its file's bytes (`source` names the file in errors).
RankTrace decode_rank_trace(const std::string& bytes, const std::string& source, int rank, int ranks,
                            const CommGroups& groups, const ImportOptions& options);

struct ImportedJob {
  std::vector<Program> programs;  // by rank
  double static_bytes = 0;        // the largest any rank's metadata records
  std::string description;        // rank 0's
  std::vector<std::string> files;
};

// The ranks are the files <prefix>.0.et, <prefix>.1.et, … up to the first missing one; their
// communication is checked against each other's (matching.hpp).
ImportedJob read_chakra_traces(const std::string& prefix, const std::string& comm_group_file,
                               const ImportOptions& options = {});

}  // namespace paradyse::chakra
