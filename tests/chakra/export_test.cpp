// Chakra traces written from paradyse's programs, checked as Chakra's tools read them: the generated
// et_def.proto classes, not paradyse's reader.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <tuple>

#include "chakra/export.hpp"
#include "costmodel/op_time.hpp"
#include "evaluation/grouped_step_option.hpp"
#include "tests/chakra/chakra_helpers.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;
using namespace paradyse::testing;
namespace pb = paradyse::chakra::pb;

namespace {

struct Encoded {
  std::vector<Program> programs;
  chakra::CommGroups groups;
  std::vector<ParsedTrace> traces;  // by rank
};

Encoded encode(std::vector<Program> programs, const hw::ClusterSpec& cluster) {
  Encoded e;
  e.programs = std::move(programs);
  e.groups = chakra::comm_groups_of(e.programs);
  const costmodel::OpTimer timer(cluster, static_cast<int>(e.programs.size()));
  for (int r = 0; r < static_cast<int>(e.programs.size()); ++r)
    e.traces.push_back(parse_trace(chakra::encode_rank_trace(e.programs, r, e.groups, timer, {"test", 5.0})));
  return e;
}

pb::CollectiveCommType comm_type(OpKind kind) {
  switch (kind) {
    case OpKind::all_reduce:
      return pb::ALL_REDUCE;
    case OpKind::all_gather:
      return pb::ALL_GATHER;
    case OpKind::reduce_scatter:
      return pb::REDUCE_SCATTER;
    case OpKind::all_to_all:
      return pb::ALL_TO_ALL;
    case OpKind::broadcast:
      return pb::BROADCAST;
    default:
      return pb::REDUCE;
  }
}

std::string pg_of(const pb::Node& node) {
  const pb::AttributeProto* a = find_attr(node, "pg_name");
  return a == nullptr ? "" : a->string_val();
}

}  // namespace

TEST_CASE("export: every op is a node of its Chakra type and size, in a file Chakra's classes parse",
          "[chakra]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  for (const Strategy* strategy : {&metp(), &ulysses_z(), &megatron_cz()}) {
    INFO(strategy->name());
    const Encoded e = encode(step_of(*strategy, 4096, gpt_8l(), cluster).programs, cluster);
    std::set<pb::CollectiveCommType> types;
    for (std::size_t r = 0; r < e.programs.size(); ++r) {
      const Program& program = e.programs[r];
      const ParsedTrace& trace = e.traces[r];
      CHECK(trace.metadata.version() == "0.0.4");
      std::size_t n = 0;
      for (const Op& op : program.ops) {
        REQUIRE(n < trace.nodes.size());
        const pb::Node& node = trace.nodes[n];
        CHECK(node.id() == n);
        if (op.kind == OpKind::send_recv) {
          CHECK(node.type() == pb::COMM_SEND_NODE);
          CHECK(trace.nodes[n + 1].type() == pb::COMM_RECV_NODE);
          CHECK(int_attr(node, "comm_src") == static_cast<int64_t>(r));
          CHECK(int_attr(node, "comm_dst") == op.ranks().rank(op.send_to));
          CHECK(int_attr(trace.nodes[n + 1], "comm_src") == op.ranks().rank(op.recv_from));
          CHECK(int_attr(trace.nodes[n + 1], "comm_dst") == static_cast<int64_t>(r));
          CHECK(int_attr(node, "comm_size") == static_cast<int64_t>(op.size_bytes));
          n += 2;
          continue;
        }
        if (is_communication(op.kind)) {
          CHECK(node.type() == pb::COMM_COLL_NODE);
          CHECK(int_attr(node, "comm_type") == comm_type(op.kind));
          types.insert(comm_type(op.kind));
          const double per_rank =
              op.kind == OpKind::all_gather ? op.size_bytes / op.group_size : op.size_bytes;
          CHECK(int_attr(node, "comm_size") == static_cast<int64_t>(per_rank));
          CHECK(e.groups.by_id.at(std::stoi(pg_of(node))).first == op.group_first);
        } else {
          CHECK(node.type() == pb::COMP_NODE);
          REQUIRE(find_attr(node, "is_cpu_op") != nullptr);
          CHECK(find_attr(node, "is_cpu_op")->bool_val() == false);
        }
        ++n;
      }
      CHECK(n == trace.nodes.size());
    }
    if (strategy == &metp()) CHECK(types.count(pb::BROADCAST) + types.count(pb::REDUCE) == 2);
    if (strategy == &ulysses_z()) CHECK(types.count(pb::ALL_TO_ALL) == 1);
  }
}

TEST_CASE("export: dependencies name earlier nodes only (acyclic) and chain each stream", "[chakra]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const Encoded e = encode(step_of(metp(), 4096, gpt_8l(), cluster).programs, cluster);
  for (const ParsedTrace& trace : e.traces) {
    std::optional<uint64_t> last_compute, last_communication;
    for (const pb::Node& node : trace.nodes) {
      std::set<uint64_t> deps(node.data_deps().begin(), node.data_deps().end());
      deps.insert(node.ctrl_deps().begin(), node.ctrl_deps().end());
      for (uint64_t dep : deps) CHECK(dep < node.id());
      const bool compute = node.type() == pb::COMP_NODE;
      std::optional<uint64_t>& previous = compute ? last_compute : last_communication;
      // A receive pairs with the send before it: both follow the same node of the stream.
      if (node.type() == pb::COMM_RECV_NODE) continue;
      if (previous) CHECK(deps.count(*previous) == 1);
      previous = node.id();
    }
  }
}

TEST_CASE("export: every group's collectives and transfers match on every member", "[chakra]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const ModelSpec& model = gpt_8l();
  GroupedStepSpec grouped = evaluation::parse_grouped_step("4:8K,2:4K,2:4K/8:16K", model,
                                                           uniform_plan(megatron_cz(), model.num_layers));
  for (const std::vector<Program>& programs :
       {step_of(metp(), 4096, model, cluster).programs,
        steps::trace_grouped_step_programs(grouped, cluster).programs}) {
    const Encoded e = encode(programs, cluster);
    const nlohmann::json groups = nlohmann::json::parse(chakra::comm_groups_json(e.groups));
    CHECK(groups.size() == e.groups.by_id.size());
    CHECK_FALSE(groups.empty());
    // By group: each member's collectives and sends in order, and the receives of each member.
    using Collective = std::tuple<int, int64_t, int64_t>;  // type, comm_type or peer, comm_size
    std::map<std::string, std::map<int, std::vector<Collective>>> by_group;
    std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>> sends, receives;  // src, dst, tag, size
    for (int r = 0; r < static_cast<int>(e.traces.size()); ++r)
      for (const pb::Node& node : e.traces[static_cast<std::size_t>(r)].nodes) {
        if (node.type() == pb::COMP_NODE) continue;
        if (node.type() == pb::COMM_COLL_NODE)
          by_group[pg_of(node)][r].emplace_back(node.type(), int_attr(node, "comm_type"),
                                                int_attr(node, "comm_size"));
        else
          (node.type() == pb::COMM_SEND_NODE ? sends : receives)
              .emplace(int_attr(node, "comm_src"), int_attr(node, "comm_dst"), int_attr(node, "comm_tag"),
                       int_attr(node, "comm_size"));
      }
    CHECK(sends == receives);
    CHECK_FALSE(sends.empty());
    for (const auto& [pg, members] : by_group) {
      const std::vector<int> ranks = groups.at(pg).get<std::vector<int>>();
      REQUIRE(members.count(ranks.front()) == 1);
      for (int rank : ranks) {
        INFO("group " << pg << ", rank " << rank);
        REQUIRE(members.count(rank) == 1);
        CHECK(members.at(rank) == members.at(ranks.front()));
      }
      CHECK(members.size() == ranks.size());  // no rank outside the group uses it
    }
  }
}

TEST_CASE("export: the nodes' FLOPs, bytes and communicated bytes total the programs'", "[chakra]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const Encoded e = encode(step_of(metp(), 16384, gpt_8l(), cluster).programs, cluster);
  for (std::size_t r = 0; r < e.programs.size(); ++r) {
    double flops = 0, bytes = 0, communicated = 0;
    for (const Op& op : e.programs[r].ops) {
      flops += op.flops;
      bytes += op.memory_bytes;
      communicated += op.size_bytes;
    }
    double num_ops = 0, tensor_size = 0, comm_size = 0;
    for (const pb::Node& node : e.traces[r].nodes) {
      if (node.type() == pb::COMP_NODE) {
        num_ops += static_cast<double>(int_attr(node, "num_ops"));
        tensor_size += static_cast<double>(int_attr(node, "tensor_size"));
      } else if (node.type() != pb::COMM_RECV_NODE) {
        const bool gather =
            node.type() == pb::COMM_COLL_NODE && int_attr(node, "comm_type") == pb::ALL_GATHER;
        comm_size += static_cast<double>(int_attr(node, "comm_size")) *
                     (gather ? e.groups.by_id.at(std::stoi(pg_of(node))).size : 1);
      }
    }
    const double rounding = static_cast<double>(e.traces[r].nodes.size());  // half a unit per node at most
    CHECK(flops > 1e12);
    CHECK(num_ops == Approx(flops).margin(rounding));
    CHECK(tensor_size == Approx(bytes).margin(rounding));
    CHECK(comm_size == Approx(communicated).margin(rounding));
    CHECK(comm_size > 0);
  }
}

TEST_CASE("export: compute nodes last what the cost model prices them at on the cluster", "[chakra]") {
  const ModelSpec& model = gpt_8l();
  double total_a100 = 0, total_h100 = 0;
  for (const char* name : {"dgx-a100", "dgx-h100"}) {
    const hw::ClusterSpec cluster = hw::load_cluster(name);
    const Encoded e = encode(step_of(megatron_ts(), 16384, model, cluster).programs, cluster);
    const costmodel::OpTimer timer(cluster, 8);
    const Program& program = e.programs.front();
    std::size_t n = 0;
    double total = 0;
    for (const Op& op : program.ops) {
      const pb::Node& node = e.traces.front().nodes[n];
      n += op.kind == OpKind::send_recv ? 2 : 1;
      if (is_communication(op.kind)) continue;
      const double seconds = find_attr(node, "paradyse.duration_s")->double_val();
      CHECK(seconds == timer.seconds(op));
      CHECK(std::abs(static_cast<double>(node.duration_micros()) - seconds * 1e6) <= 0.5);
      total += seconds;
    }
    (std::string(name) == "dgx-a100" ? total_a100 : total_h100) = total;
  }
  CHECK(total_h100 < 0.8 * total_a100);  // priced on each cluster's GPU
}

TEST_CASE("export: writes a file per rank and the comm-group file, each whole", "[chakra]") {
  const TempDir dir;
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const steps::StepPrograms step = step_of(ulysses_z(), 4096, gpt_8l(), cluster);
  const chakra::ExportedTraces exported =
      chakra::write_chakra_traces(step.programs, cluster, {"gpt-8l ulysses_z", step.static_bytes},
                                  dir.file("step"), dir.file("groups.json"));
  REQUIRE(exported.files.size() == 8);
  for (int r = 0; r < 8; ++r) {
    CHECK(exported.files[static_cast<std::size_t>(r)] == dir.file("step." + std::to_string(r) + ".et"));
    CHECK(std::filesystem::exists(exported.files[static_cast<std::size_t>(r)]));
  }
  CHECK_FALSE(std::filesystem::exists(dir.file("step.8.et")));
  const nlohmann::json groups = nlohmann::json::parse(std::ifstream(dir.file("groups.json")));
  CHECK(groups.at("1") == nlohmann::json({0, 1, 2, 3, 4, 5, 6, 7}));
  CHECK(exported.groups == static_cast<int>(groups.size()));
}
