#include "chakra/import.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <unordered_map>

#include "chakra/attributes.hpp"
#include "chakra/delimited.hpp"
#include "chakra/export.hpp"
#include "chakra/matching.hpp"
#include "common/errors.hpp"
#include "common/input_file.hpp"

namespace paradyse::chakra {
namespace {

// A rank's file is read whole: 4 GiB holds some 40 million nodes.
constexpr int64_t kMaxTraceFileBytes = int64_t{4} << 30;
// An op names its group's ranks and peers in 16 bits.
constexpr int kMaxRanks = std::numeric_limits<int16_t>::max();
// The last field numbers of Chakra's GlobalMetadata and Node.
constexpr int kLastMetadataField = 2;
constexpr int kLastNodeField = 11;

std::optional<OpKind> op_kind_named(std::string_view name) {
  for (std::size_t k = 0; k < kOpKindCount; ++k)
    if (to_string(static_cast<OpKind>(k)) == name) return static_cast<OpKind>(k);
  return std::nullopt;
}

std::optional<Phase> phase_named(std::string_view name) {
  for (int p = 0; p <= static_cast<int>(Phase::optimizer); ++p)
    if (to_string(static_cast<Phase>(p)) == name) return static_cast<Phase>(p);
  return std::nullopt;
}

std::optional<OpKind> collective_kind(int64_t comm_type) {
  for (const auto& [kind, type] : kCollectives)
    if (type == comm_type) return kind;
  return std::nullopt;
}

std::string type_name(int type) {
  const std::string name =
      pb::NodeType_IsValid(type) ? pb::NodeType_Name(static_cast<pb::NodeType>(type)) : "";
  return name.empty() ? "type " + std::to_string(type) : name;
}

class RankDecoder {
 public:
  RankDecoder(const std::string& bytes, const std::string& source, int rank, int ranks,
              const CommGroups& groups, const ImportOptions& options)
      : bytes_(bytes), source_(source), rank_(rank), ranks_(ranks), groups_(groups), options_(options) {}

  RankTrace decode() {
    DelimitedReader reader(bytes_, source_);
    reader.read(metadata_, "metadata", kLastMetadataField);
    while (!reader.done()) {
      const std::string field = node_field(nodes_.size());
      reader.read(nodes_.emplace_back(), field, kLastNodeField);
    }
    trace_.program.rank = trace_.program.job_rank = rank_;
    trace_.program.degree = trace_.program.job_degree = ranks_;
    read_metadata();
    build_ops(topological_order());
    const AttributeReader metadata(metadata_.attr(), source_, "metadata");
    for (int64_t bytes : metadata.integers(attr::memory_events_at_end))
      trace_.program.memory.push_back({static_cast<OpId>(trace_.program.ops.size()), bytes});
    for (int64_t bytes : metadata.integers(attr::host_memory_events_at_end))
      trace_.program.host_memory.push_back({static_cast<OpId>(trace_.program.ops.size()), bytes});
    mark_phases();
    return std::move(trace_);
  }

 private:
  void read_metadata() {
    const AttributeReader a(metadata_.attr(), source_, "metadata");
    if (const auto rank = a.integer(attr::rank); rank && *rank != rank_)
      a.fail(attr::rank, "expected rank " + std::to_string(rank_) + ", as the file's name says, got " +
                             std::to_string(*rank));
    if (const auto ranks = a.integer(attr::ranks); ranks && *ranks != ranks_)
      a.fail(attr::ranks, "expected " + std::to_string(ranks_) + " ranks, as there are files, got " +
                              std::to_string(*ranks));
    trace_.static_bytes = a.number(attr::static_bytes).value_or(0);
    if (trace_.static_bytes < 0) a.fail(attr::static_bytes, "expected a non-negative number of bytes");
    trace_.description = a.text(attr::description).value_or("");
  }

  // Node indices in an order where every node comes after its dependencies: the file's order, each node
  // moved only as far as its dependencies require.
  std::vector<std::size_t> topological_order() {
    std::unordered_map<uint64_t, std::size_t> index_of;
    index_of.reserve(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (!index_of.emplace(nodes_[i].id(), i).second)
        throw InputError(source_, 0, node_field(i) + ".id",
                         "expected ids unique in the file, got " + std::to_string(nodes_[i].id()) +
                             " again (first at " + node_field(index_of[nodes_[i].id()]) + ")");
    parents_.assign(nodes_.size(), {});
    ordering_only_.assign(nodes_.size(), {});
    std::vector<std::vector<std::size_t>> children(nodes_.size());
    std::vector<std::size_t> waiting(nodes_.size(), 0);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const auto add = [&](const google::protobuf::RepeatedField<uint64_t>& deps, const char* name) {
        for (uint64_t dep : deps) {
          const auto found = index_of.find(dep);
          if (found == index_of.end() || found->second == i)
            throw InputError(source_, 0, node_field(i) + "." + name,
                             "expected ids of other nodes of the file, got " + std::to_string(dep));
          if (std::find(parents_[i].begin(), parents_[i].end(), found->second) != parents_[i].end()) continue;
          if (name == std::string_view("ctrl_deps")) ordering_only_[i].push_back(found->second);
          parents_[i].push_back(found->second);
          children[found->second].push_back(i);
          ++waiting[i];
        }
      };
      add(nodes_[i].data_deps(), "data_deps");
      add(nodes_[i].ctrl_deps(), "ctrl_deps");
    }
    std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (waiting[i] == 0) ready.push(i);
    std::vector<std::size_t> order;
    order.reserve(nodes_.size());
    while (!ready.empty()) {
      const std::size_t i = ready.top();
      ready.pop();
      order.push_back(i);
      for (std::size_t child : children[i])
        if (--waiting[child] == 0) ready.push(child);
    }
    if (order.size() < nodes_.size())
      for (std::size_t i = 0; i < nodes_.size(); ++i)
        if (waiting[i] > 0)
          throw InputError(source_, 0, node_field(i),
                           "expected dependencies without a cycle, got a cycle that this node waits on");
    return order;
  }

  uint16_t label(const std::string& name) {
    if (name.empty()) return 0;
    const auto [it, added] = labels_.try_emplace(name, static_cast<uint16_t>(trace_.program.labels.size()));
    if (!added) return it->second;
    if (trace_.program.labels.size() > std::numeric_limits<uint16_t>::max()) {  // no ids left: unnamed
      labels_.erase(it);
      return 0;
    }
    trace_.program.labels.push_back(name);
    return it->second;
  }

  // The group a pg_name names: every rank for none or "0" (ASTRA-sim's convention).
  RankSet group_of(const AttributeReader& a) const {
    const std::string name = a.text(attr::pg_name).value_or("");
    if (name.empty() || name == "0") return {0, ranks_, 1};
    int id = 0;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), id);
    const auto found = groups_.by_id.find(id);
    if (error != std::errc() || end != name.data() + name.size() || found == groups_.by_id.end())
      a.fail(attr::pg_name, "expected the id of a group of the comm-group file, got '" + name + "'");
    return found->second;
  }

  // Member index of job rank `member` in `group`, which must hold it.
  static int16_t index_in(const RankSet& group, int member, const AttributeReader& a, std::string_view name) {
    if (!group.holds(member))
      a.fail(name,
             "expected a rank of the node's group (" + to_string(group) + "), got " + std::to_string(member));
    return static_cast<int16_t>((member - group.first) / group.stride);
  }

  static double non_negative(const AttributeReader& a, std::string_view name, bool required) {
    const std::optional<double> value = a.number(name);
    if (!value && required) a.fail(name, "expected this attribute, got none");
    if (value.value_or(0) < 0) a.fail(name, "expected a non-negative number, got " + std::to_string(*value));
    return value.value_or(0);
  }

  void common(Op& op, const pb::Node& node, const AttributeReader& a) {
    op.label = label(node.name());
    if (const auto phase = a.text(attr::phase)) {
      const std::optional<Phase> named = phase_named(*phase);
      if (!named)
        a.fail(attr::phase, "expected a phase of a training step (layer_forward, ...), got '" + *phase + "'");
      op.phase = *named;
    }
    const int64_t layer = a.integer(attr::layer).value_or(-1);
    if (layer < -1 || layer > std::numeric_limits<int16_t>::max())
      a.fail(attr::layer, "expected a layer index, got " + std::to_string(layer));
    op.layer = static_cast<int16_t>(layer);
  }

  void compute(Op& op, const pb::Node& node, const AttributeReader& a) {
    op.stream = Stream::compute;
    op.flops = non_negative(a, attr::num_ops, false);
    op.memory_bytes = non_negative(a, attr::tensor_size, false);
    const std::optional<std::string> kind = a.text(attr::kind);
    if (kind) {
      const std::optional<OpKind> named = op_kind_named(*kind);
      if (!named || is_communication(*named))
        a.fail(attr::kind,
               "expected a compute op's kind (gemm, memory_bound, wait, ...), got '" + *kind + "'");
      op.kind = *named;
      const std::string kernel = a.text(attr::kernel).value_or(op.kind == OpKind::wait ? "wait" : "zeros");
      const std::optional<Kernel> call = kernel_named(kernel);
      if (!call || *call == Kernel::communication)
        a.fail(attr::kernel, "expected a compute call of paradyse's backend, got '" + kernel + "'");
      op.kernel = *call;
      const std::vector<int64_t> dims = a.integers(attr::dims);
      if (dims.size() > op.dims.size() ||
          std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; }))
        a.fail(attr::dims, "expected at most 4 non-negative sizes");
      std::copy(dims.begin(), dims.end(), op.dims.begin());
      op.host_waits = a.flag(attr::host_waits).value_or(false);
      op.partially_masked = a.flag(attr::partially_masked).value_or(false);
      op.drops_out = a.flag(attr::drops_out).value_or(false);
    } else if (op.flops > 0) {  // another tool's node: a square GEMM of its FLOPs, should it be priced
      op.kind = OpKind::gemm;
      op.kernel = Kernel::matmul;
      const auto side = std::max<int64_t>(1, std::llround(std::cbrt(op.flops / 2)));
      op.dims = {side, side, side, 0};
    } else {
      op.kind = OpKind::memory_bound;
      op.kernel = Kernel::add;
    }
    // A node paradyse wrote is priced from its kind and shape, any other from its work (above).
    if (options_.price_compute) return;
    const std::optional<double> exact = a.number(attr::duration_s);
    if (exact && *exact < 0) a.fail(attr::duration_s, "expected a non-negative number of seconds");
    op.duration_s = exact.value_or(static_cast<double>(node.duration_micros()) * 1e-6);
  }

  // A memory node: a copy to host memory (store) or back (load) on the copy stream, of its bytes.
  void copy(Op& op, const pb::Node& node, const AttributeReader& a) {
    op.stream = Stream::copy;
    op.kind = OpKind::host_copy;
    op.kernel = node.type() == pb::MEM_STORE_NODE ? Kernel::offload : Kernel::reload;
    op.size_bytes = op.memory_bytes = non_negative(a, attr::tensor_size, true);
    if (options_.price_compute) return;
    const std::optional<double> exact = a.number(attr::duration_s);
    if (exact && *exact < 0) a.fail(attr::duration_s, "expected a non-negative number of seconds");
    op.duration_s = exact.value_or(static_cast<double>(node.duration_micros()) * 1e-6);
  }

  void set_group(Op& op, const RankSet& group) {
    op.stream = Stream::communication;
    op.kernel = Kernel::communication;
    op.group_first = static_cast<int16_t>(group.first);
    op.group_size = static_cast<int16_t>(group.size);
    op.group_stride = static_cast<int16_t>(group.stride);
  }

  void collective(Op& op, const AttributeReader& a) {
    const std::optional<int64_t> type = a.integer(attr::comm_type);
    if (!type) a.fail(attr::comm_type, "expected this attribute, got none");
    const std::optional<OpKind> kind = collective_kind(*type);
    if (!kind)
      a.fail(
          attr::comm_type,
          "expected ALL_REDUCE, REDUCE, ALL_GATHER, BROADCAST, ALL_TO_ALL or REDUCE_SCATTER (the collectives "
          "paradyse simulates), got " +
              (pb::CollectiveCommType_IsValid(static_cast<int>(*type))
                   ? pb::CollectiveCommType_Name(static_cast<pb::CollectiveCommType>(*type))
                   : std::to_string(*type)));
    op.kind = *kind;
    const RankSet group = group_of(a);
    index_in(group, rank_, a, attr::pg_name);
    set_group(op, group);
    const CommunicationBytes bytes =
        communication_bytes(op.kind, non_negative(a, attr::comm_size, true), group.size);
    op.size_bytes = bytes.size_bytes;
    op.bus_bytes = bytes.bus_bytes;
    if (op.kind == OpKind::broadcast || op.kind == OpKind::reduce) {
      const int64_t root = a.integer(attr::root).value_or(0);
      if (root < 0 || root >= group.size)
        a.fail(attr::root, "expected a member of the group (0 to " + std::to_string(group.size - 1) + ")");
      op.root = static_cast<int16_t>(root);
    }
  }

  // A send's peer (comm_dst) or a receive's (comm_src); the other end must be this rank, if given.
  int peer(const AttributeReader& a, bool send) const {
    const std::string_view mine = send ? attr::comm_src : attr::comm_dst;
    const std::string_view theirs = send ? attr::comm_dst : attr::comm_src;
    if (const auto self = a.integer(mine); self && *self != rank_)
      a.fail(mine, "expected this file's rank, " + std::to_string(rank_) + ", got " + std::to_string(*self));
    const std::optional<int64_t> other = a.integer(theirs);
    if (!other || *other < 0 || *other >= ranks_ || *other == rank_)
      a.fail(theirs, "expected another rank of the job's " + std::to_string(ranks_) + ", got " +
                         (other ? std::to_string(*other) : std::string("none")));
    return static_cast<int>(*other);
  }

  // A send (and the receive after it, when `receive` is given) as one transfer op.
  void transfer(Op& op, const pb::Node& node, const AttributeReader& a, const pb::Node* receive,
                const AttributeReader* r) {
    op.kind = OpKind::send_recv;
    const bool send = node.type() == pb::COMM_SEND_NODE;
    const int other = peer(a, send);
    RankSet group{std::min(rank_, other), 2, std::abs(other - rank_)};
    if (receive != nullptr) group = group_of(a);
    index_in(group, rank_, a, attr::pg_name);
    (send ? op.send_to : op.recv_from) = index_in(group, other, a, send ? attr::comm_dst : attr::comm_src);
    if (receive != nullptr) op.recv_from = index_in(group, peer(*r, false), *r, attr::comm_src);
    set_group(op, group);
    op.size_bytes = op.bus_bytes = non_negative(a, attr::comm_size, true);
  }

  // Whether node `j`, after send `i` in the order, is its exchange's receive: same group, tag and size.
  bool pairs(const pb::Node& send, const pb::Node& receive, std::size_t i, std::size_t j) const {
    if (send.type() != pb::COMM_SEND_NODE || receive.type() != pb::COMM_RECV_NODE) return false;
    const AttributeReader s(send.attr(), source_, node_field(i)), r(receive.attr(), source_, node_field(j));
    const std::optional<std::string> group = s.text(attr::pg_name);
    return group && !group->empty() && group == r.text(attr::pg_name) &&
           s.integer(attr::comm_tag).value_or(0) == r.integer(attr::comm_tag).value_or(0) &&
           s.number(attr::comm_size) == r.number(attr::comm_size) &&
           std::find(parents_[j].begin(), parents_[j].end(), i) == parents_[j].end();
  }

  void build_ops(const std::vector<std::size_t>& order) {
    Program& program = trace_.program;
    std::vector<OpId> op_of_node(nodes_.size());
    std::array<std::optional<OpId>, kStreamCount> last_on_stream;
    for (std::size_t position = 0; position < order.size(); ++position) {
      const std::size_t i = order[position];
      const pb::Node& node = nodes_[i];
      const AttributeReader a(node.attr(), source_, node_field(i));
      const auto id = static_cast<OpId>(program.ops.size());
      Op op;
      common(op, node, a);
      std::vector<std::size_t> members{i};
      switch (node.type()) {
        case pb::COMP_NODE:
          compute(op, node, a);
          break;
        case pb::COMM_COLL_NODE:
          collective(op, a);
          break;
        case pb::MEM_STORE_NODE:
        case pb::MEM_LOAD_NODE:
          copy(op, node, a);
          break;
        case pb::COMM_SEND_NODE:
        case pb::COMM_RECV_NODE:
          if (position + 1 < order.size() &&
              pairs(node, nodes_[order[position + 1]], i, order[position + 1])) {
            const std::size_t j = order[++position];
            const AttributeReader r(nodes_[j].attr(), source_, node_field(j));
            transfer(op, node, a, &nodes_[j], &r);
            members.push_back(j);
          } else {
            transfer(op, node, a, nullptr, nullptr);
          }
          break;
        default:
          throw InputError(
              source_, 0, node_field(i) + ".type",
              "expected COMP_NODE, COMM_COLL_NODE, COMM_SEND_NODE, COMM_RECV_NODE, MEM_STORE_NODE or "
              "MEM_LOAD_NODE (the nodes paradyse simulates), got " +
                  type_name(node.type()));
      }
      // A control dependency on the op before this one on its stream is the stream's order, which the
      // executor keeps anyway: not a dependency of the op.
      std::optional<OpId>& previous = last_on_stream[static_cast<std::size_t>(op.stream)];
      for (std::size_t member : members) {
        op_of_node[member] = id;
        for (std::size_t parent : parents_[member]) {
          const OpId dep = op_of_node[parent];
          const std::vector<std::size_t>& ordering = ordering_only_[member];
          if (dep == previous && std::find(ordering.begin(), ordering.end(), parent) != ordering.end())
            continue;
          if (dep != id && std::find(op.deps.begin(), op.deps.end(), dep) == op.deps.end())
            op.deps.push_back(dep);
        }
      }
      previous = id;
      for (int64_t bytes : a.integers(attr::memory_events)) program.memory.push_back({id, bytes});
      for (int64_t bytes : a.integers(attr::host_memory_events)) program.host_memory.push_back({id, bytes});
      program.ops.push_back(std::move(op));
      trace_.node_of_op.push_back(static_cast<uint32_t>(i));
    }
  }

  // A phase mark wherever an op's phase or layer differs from the op's before it.
  void mark_phases() {
    Program& program = trace_.program;
    std::size_t event = 0;
    for (OpId id = 0; id < program.ops.size(); ++id) {
      const Op& op = program.ops[id];
      if (id > 0 && op.phase == program.ops[id - 1].phase && op.layer == program.ops[id - 1].layer) continue;
      while (event < program.memory.size() && program.memory[event].before_op < id) ++event;
      program.phases.push_back({op.phase, op.layer, id, static_cast<uint32_t>(event)});
    }
  }

  const std::string& bytes_;
  const std::string& source_;
  const int rank_, ranks_;
  const CommGroups& groups_;
  const ImportOptions& options_;
  pb::GlobalMetadata metadata_;
  std::vector<pb::Node> nodes_;
  std::vector<std::vector<std::size_t>> parents_;        // by node: its dependencies' indices
  std::vector<std::vector<std::size_t>> ordering_only_;  // by node: those only in its ctrl_deps
  std::unordered_map<std::string, uint16_t> labels_;
  RankTrace trace_;
};

// InputError unless the metadata's paradyse.ranks, if any, is `ranks`.
void check_declared_ranks(const std::string& bytes, const std::string& source, int ranks) {
  pb::GlobalMetadata metadata;
  DelimitedReader(bytes, source).read(metadata, "metadata", kLastMetadataField);
  const AttributeReader a(metadata.attr(), source, "metadata");
  if (const auto declared = a.integer(attr::ranks); declared && *declared != ranks)
    a.fail(attr::ranks, "expected " + std::to_string(ranks) + " ranks, as there are files (" +
                            std::to_string(ranks) + " from .0.et on), got " + std::to_string(*declared));
}

}  // namespace

std::string node_field(std::size_t index) {
  return "node[" + std::to_string(index) + "]";
}

RankTrace decode_rank_trace(const std::string& bytes, const std::string& source, int rank, int ranks,
                            const CommGroups& groups, const ImportOptions& options) {
  PARADYSE_CHECK(rank >= 0 && rank < ranks && ranks <= kMaxRanks, "a rank of the job");
  return RankDecoder(bytes, source, rank, ranks, groups, options).decode();
}

ImportedJob read_chakra_traces(const std::string& prefix, const std::string& comm_group_file,
                               const ImportOptions& options) {
  ImportedJob job;
  while (std::filesystem::exists(rank_trace_path(prefix, static_cast<int>(job.files.size())))) {
    if (static_cast<int>(job.files.size()) == kMaxRanks)
      throw InputError(rank_trace_path(prefix, kMaxRanks), 0, "",
                       "expected at most " + std::to_string(kMaxRanks) + " ranks' files");
    job.files.push_back(rank_trace_path(prefix, static_cast<int>(job.files.size())));
  }
  if (job.files.empty())
    throw InputError(rank_trace_path(prefix, 0), 0, "",
                     "expected rank 0's Chakra trace (<prefix>.<rank>.et), got no such file");
  const int ranks = static_cast<int>(job.files.size());
  std::vector<std::string> bytes;
  for (const std::string& path : job.files)
    bytes.push_back(read_input_file(path, {"Chakra execution trace", kMaxTraceFileBytes, 0}));
  // A missing file shows as fewer ranks than the job's: said by rank 0's metadata before the groups,
  // which would name ranks beyond them.
  check_declared_ranks(bytes.front(), job.files.front(), ranks);
  const CommGroups groups = read_comm_groups(comm_group_file, ranks);
  std::vector<RankTrace> traces;
  for (int r = 0; r < ranks; ++r) {
    traces.push_back(decode_rank_trace(bytes[static_cast<std::size_t>(r)],
                                       job.files[static_cast<std::size_t>(r)], r, ranks, groups, options));
    bytes[static_cast<std::size_t>(r)] = {};
  }
  check_collectives_match(traces, job.files);
  job.description = traces.front().description;
  for (RankTrace& trace : traces) {
    job.static_bytes = std::max(job.static_bytes, trace.static_bytes);
    job.programs.push_back(std::move(trace.program));
  }
  return job;
}

}  // namespace paradyse::chakra
