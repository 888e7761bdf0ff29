// A job's per-rank programs as MLCommons Chakra execution traces (et_def.proto), one file per rank,
// <prefix>.<rank>.et, and the communicator-group file that ASTRA-sim takes (comm_groups.hpp).
//
// Each op of a program is one node, but a send_recv op, which is two: a COMM_SEND_NODE to its peer
// and a COMM_RECV_NODE from the other, each with the op's dependencies. Compute ops (and stream
// waits, which take no time) are COMP_NODEs with their duration as paradyse prices it on the cluster
// (duration_micros, rounded; paradyse.duration_s exactly), their FLOPs (num_ops) and bytes read and
// written (tensor_size); collectives are COMM_COLL_NODEs with comm_type, comm_size (the bytes each rank
// puts in: an all-gather's shard, the buffer of the others, as Chakra's PyTorch converter and
// ASTRA-sim count it) and pg_name (a group id of the comm-group file). data_deps are the op's
// dependencies; ctrl_deps the op before it on its stream (compute or communication), where that is not
// already a dependency. Node ids number the nodes from 0 in program order, which is a topological order.
// Attributes named paradyse.* carry what paradyse's simulator needs beyond Chakra's (the op's kind and
// backend call, phase, layer, memory events): import.hpp reads them back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chakra/comm_groups.hpp"
#include "costmodel/op_time.hpp"
#include "program/program.hpp"

namespace paradyse::chakra {

// What every file's GlobalMetadata records besides the rank.
struct TraceMetadata {
  std::string description;  // the job, in words: model, plan, sequence, cluster
  double static_bytes = 0;  // what each rank holds before its first op (weights, gradients, optimizer)
};

// "<prefix>.<rank>.et", the name ASTRA-sim reads rank `rank`'s trace from.
std::string rank_trace_path(const std::string& prefix, int rank);

// The bytes of rank `rank`'s file. `timer` prices the ops (an OpTimer of the job's cluster and degree);
// `groups` holds every group the programs communicate over (comm_groups_of).
std::string encode_rank_trace(const std::vector<Program>& programs, int rank, const CommGroups& groups,
                              const costmodel::OpTimer& timer, const TraceMetadata& metadata);

struct ExportedTraces {
  std::vector<std::string> files;  // by rank
  std::string comm_group_file;
  uint64_t nodes = 0;  // over every rank
  int groups = 0;
};

// Writes every rank's file and the comm-group file (each whole or not at all), pricing on `cluster`.
ExportedTraces write_chakra_traces(const std::vector<Program>& programs, const hw::ClusterSpec& cluster,
                                   const TraceMetadata& metadata, const std::string& prefix,
                                   const std::string& comm_group_file);

}  // namespace paradyse::chakra
