#include "chakra/export.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

#include "chakra/attributes.hpp"
#include "chakra/delimited.hpp"

#include "common/atomic_file.hpp"
#include "common/errors.hpp"

namespace paradyse::chakra {
namespace {

pb::CollectiveCommType comm_type_of(OpKind kind) {
  for (const auto& [collective, type] : kCollectives)
    if (collective == kind) return type;
  PARADYSE_CHECK(false, "no Chakra collective for a " + std::string(to_string(kind)));
  return pb::ALL_REDUCE;
}

int64_t whole(double value) {
  return static_cast<int64_t>(std::llround(value));
}

// The bytes each rank of the op's group puts in (Chakra's comm_size).
double input_bytes(const Op& op) {
  return op.kind == OpKind::all_gather ? op.size_bytes / op.group_size : op.size_bytes;
}

class RankEncoder {
 public:
  RankEncoder(const std::vector<Program>& programs, int rank, const CommGroups& groups,
              const costmodel::OpTimer& timer)
      : program_(programs[static_cast<std::size_t>(rank)]), rank_(rank), groups_(groups), timer_(timer) {
    uint64_t next = 0;
    first_node_.reserve(program_.ops.size());
    for (const Op& op : program_.ops) {
      first_node_.push_back(next);
      next += op.kind == OpKind::send_recv ? 2 : 1;
    }
    events_before_.resize(program_.ops.size() + 1);
    for (const MemoryEvent& event : program_.memory)
      events_before_[std::min<std::size_t>(event.before_op, program_.ops.size())].push_back(event.bytes);
    host_events_before_.resize(program_.ops.size() + 1);
    for (const MemoryEvent& event : program_.host_memory)
      host_events_before_[std::min<std::size_t>(event.before_op, program_.ops.size())].push_back(event.bytes);
  }

  const std::vector<int64_t>& events_at_end() const { return events_before_.back(); }
  const std::vector<int64_t>& host_events_at_end() const { return host_events_before_.back(); }

  void append_nodes(std::string& out) {
    for (OpId id = 0; id < program_.ops.size(); ++id) {
      const Op& op = program_.ops[id];
      if (op.kind == OpKind::send_recv) {
        append_delimited(send_recv_node(op, id, pb::COMM_SEND_NODE, 0), out);
        append_delimited(send_recv_node(op, id, pb::COMM_RECV_NODE, 1), out);
      } else {
        append_delimited(is_communication(op.kind)      ? collective_node(op, id)
                         : op.kind == OpKind::host_copy ? copy_node(op, id)
                                                        : compute_node(op, id),
                         out);
      }
      last_on_stream_[static_cast<std::size_t>(op.stream)] = id;
    }
  }

 private:
  // The node ids of op `id`: one, or a send_recv's two.
  void add_ids(google::protobuf::RepeatedField<uint64_t>& ids, OpId id) const {
    ids.Add(first_node_[id]);
    if (program_.ops[id].kind == OpKind::send_recv) ids.Add(first_node_[id] + 1);
  }

  // id, name, dependencies and the attributes every node has. `part`: which node of the op.
  pb::Node common(const Op& op, OpId id, pb::NodeType type, int part) {
    pb::Node node;
    node.set_id(first_node_[id] + static_cast<uint64_t>(part));
    const std::string_view label = program_.label(op);
    node.set_name(std::string(!label.empty()              ? label
                              : is_communication(op.kind) ? to_string(op.kind)
                                                          : to_string(op.kernel)));
    node.set_type(type);
    for (OpId dep : op.deps) add_ids(*node.mutable_data_deps(), dep);
    const std::optional<OpId> previous = last_on_stream_[static_cast<std::size_t>(op.stream)];
    if (previous && std::find(op.deps.begin(), op.deps.end(), *previous) == op.deps.end())
      add_ids(*node.mutable_ctrl_deps(), *previous);
    Attributes& attrs = *node.mutable_attr();
    add_bool(attrs, attr::is_cpu_op, false);
    add_string(attrs, attr::kind, to_string(op.kind));
    add_string(attrs, attr::phase, to_string(op.phase));
    if (op.layer >= 0) add_int(attrs, attr::layer, op.layer);
    if (part == 0 && !events_before_[id].empty()) add_ints(attrs, attr::memory_events, events_before_[id]);
    if (part == 0 && !host_events_before_[id].empty())
      add_ints(attrs, attr::host_memory_events, host_events_before_[id]);
    return node;
  }

  pb::Node compute_node(const Op& op, OpId id) {
    pb::Node node = common(op, id, pb::COMP_NODE, 0);
    const double seconds = timer_.seconds(op);
    node.set_duration_micros(static_cast<uint64_t>(whole(seconds * 1e6)));
    Attributes& attrs = *node.mutable_attr();
    add_int(attrs, attr::num_ops, whole(op.flops));
    add_int(attrs, attr::tensor_size, whole(op.memory_bytes));
    add_double(attrs, attr::duration_s, seconds);
    add_string(attrs, attr::kernel, to_string(op.kernel));
    if (std::any_of(op.dims.begin(), op.dims.end(), [](int64_t d) { return d != 0; }))
      add_ints(attrs, attr::dims, {op.dims.begin(), op.dims.end()});
    if (op.host_waits) add_bool(attrs, attr::host_waits, true);
    if (op.partially_masked) add_bool(attrs, attr::partially_masked, true);
    if (op.drops_out) add_bool(attrs, attr::drops_out, true);
    return node;
  }

  // A copy over the host link (activation offload): Chakra's memory nodes, a store to host memory or a
  // load from it, with the bytes it moves.
  pb::Node copy_node(const Op& op, OpId id) {
    pb::Node node = common(op, id, op.kernel == Kernel::offload ? pb::MEM_STORE_NODE : pb::MEM_LOAD_NODE, 0);
    const double seconds = timer_.seconds(op);
    node.set_duration_micros(static_cast<uint64_t>(whole(seconds * 1e6)));
    Attributes& attrs = *node.mutable_attr();
    add_int(attrs, attr::tensor_size, whole(op.size_bytes));
    add_double(attrs, attr::duration_s, seconds);
    add_string(attrs, attr::kernel, to_string(op.kernel));
    return node;
  }

  void add_communication(pb::Node& node, const Op& op, double bytes) {
    node.set_duration_micros(static_cast<uint64_t>(whole(timer_.communication_s(op) * 1e6)));
    Attributes& attrs = *node.mutable_attr();
    add_int(attrs, attr::comm_size, whole(bytes));
    const int group = groups_.id_of(op.ranks());
    PARADYSE_CHECK(group > 0, "a communication op over a group the comm groups lack");
    add_string(attrs, attr::pg_name, std::to_string(group));
  }

  pb::Node collective_node(const Op& op, OpId id) {
    pb::Node node = common(op, id, pb::COMM_COLL_NODE, 0);
    add_int(*node.mutable_attr(), attr::comm_type, comm_type_of(op.kind));
    add_communication(node, op, input_bytes(op));
    if (op.kind == OpKind::broadcast || op.kind == OpKind::reduce)
      add_int(*node.mutable_attr(), attr::root, op.root);
    return node;
  }

  // The k-th send_recv over a group has the same tag on every rank of it: k·groups + group id.
  pb::Node send_recv_node(const Op& op, OpId id, pb::NodeType type, int part) {
    pb::Node node = common(op, id, type, part);
    add_communication(node, op, op.size_bytes);
    const int group = groups_.id_of(op.ranks());
    if (part == 0) sends_[group]++;
    const int64_t tag = (sends_[group] - 1) * static_cast<int64_t>(groups_.by_id.size() + 1) + group;
    Attributes& attrs = *node.mutable_attr();
    const RankSet ranks = op.ranks();
    const bool send = type == pb::COMM_SEND_NODE;
    add_int(attrs, attr::comm_src, send ? rank_ : ranks.rank(op.recv_from));
    add_int(attrs, attr::comm_dst, send ? ranks.rank(op.send_to) : rank_);
    add_int(attrs, attr::comm_tag, tag);
    return node;
  }

  const Program& program_;
  const int rank_;
  const CommGroups& groups_;
  const costmodel::OpTimer& timer_;
  std::vector<uint64_t> first_node_;                      // by op
  std::vector<std::vector<int64_t>> events_before_;       // by op, and after the last
  std::vector<std::vector<int64_t>> host_events_before_;  // the same in host memory
  std::array<std::optional<OpId>, kStreamCount> last_on_stream_;
  std::map<int, int64_t> sends_;  // send_recv ops so far, by group id
};

}  // namespace

std::string rank_trace_path(const std::string& prefix, int rank) {
  return prefix + "." + std::to_string(rank) + ".et";
}

std::string encode_rank_trace(const std::vector<Program>& programs, int rank, const CommGroups& groups,
                              const costmodel::OpTimer& timer, const TraceMetadata& metadata) {
  PARADYSE_CHECK(rank >= 0 && rank < static_cast<int>(programs.size()), "a rank of the job");
  RankEncoder encoder(programs, rank, groups, timer);
  pb::GlobalMetadata header;
  header.set_version(std::string(kSchemaVersion));
  Attributes& attrs = *header.mutable_attr();
  add_int(attrs, attr::rank, rank);
  add_int(attrs, attr::ranks, static_cast<int64_t>(programs.size()));
  add_double(attrs, attr::static_bytes, metadata.static_bytes);
  if (!metadata.description.empty()) add_string(attrs, attr::description, metadata.description);
  if (!encoder.events_at_end().empty()) add_ints(attrs, attr::memory_events_at_end, encoder.events_at_end());
  if (!encoder.host_events_at_end().empty())
    add_ints(attrs, attr::host_memory_events_at_end, encoder.host_events_at_end());
  std::string out;
  append_delimited(header, out);
  encoder.append_nodes(out);
  return out;
}

ExportedTraces write_chakra_traces(const std::vector<Program>& programs, const hw::ClusterSpec& cluster,
                                   const TraceMetadata& metadata, const std::string& prefix,
                                   const std::string& comm_group_file) {
  const costmodel::OpTimer timer(cluster, static_cast<int>(programs.size()));
  const CommGroups groups = comm_groups_of(programs);
  // `--out out/step` on a fresh checkout names a folder that does not exist yet: make it. A folder
  // that cannot be made is reported by the write below, which names the file.
  for (const std::string& file : {rank_trace_path(prefix, 0), comm_group_file}) {
    std::error_code ignored;
    if (const std::filesystem::path parent = std::filesystem::path(file).parent_path(); !parent.empty())
      std::filesystem::create_directories(parent, ignored);
  }
  ExportedTraces exported;
  for (int rank = 0; rank < static_cast<int>(programs.size()); ++rank) {
    const std::string bytes = encode_rank_trace(programs, rank, groups, timer, metadata);
    const std::string path = rank_trace_path(prefix, rank);
    write_file_atomically(path, [&](std::ostream& out) {
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    });
    exported.files.push_back(path);
    for (const Op& op : programs[static_cast<std::size_t>(rank)].ops)
      exported.nodes += op.kind == OpKind::send_recv ? 2 : 1;
  }
  const std::string json = comm_groups_json(groups);
  write_file_atomically(comm_group_file, [&](std::ostream& out) { out << json; });
  exported.comm_group_file = comm_group_file;
  exported.groups = static_cast<int>(groups.by_id.size());
  return exported;
}

}  // namespace paradyse::chakra
