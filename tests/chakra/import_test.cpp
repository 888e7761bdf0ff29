// Chakra traces read back into paradyse programs: the round trip, other tools' nodes, and files that
// are refused, by file and node.
#include <catch2/catch.hpp>

#include "chakra/delimited.hpp"
#include "chakra/export.hpp"
#include "chakra/import.hpp"
#include "chakra/matching.hpp"
#include "common/errors.hpp"
#include "costmodel/op_time.hpp"
#include "tests/chakra/chakra_helpers.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse;
using namespace paradyse::testing;
namespace pb = paradyse::chakra::pb;

namespace {

std::vector<std::string> encode_all(const std::vector<Program>& programs, const chakra::CommGroups& groups,
                                    const hw::ClusterSpec& cluster) {
  const costmodel::OpTimer timer(cluster, static_cast<int>(programs.size()));
  std::vector<std::string> files;
  for (int r = 0; r < static_cast<int>(programs.size()); ++r)
    files.push_back(chakra::encode_rank_trace(programs, r, groups, timer, {"test", 7.0}));
  return files;
}

// A file of `nodes` after a metadata message, as another tool might write it.
std::string file_of(const std::vector<pb::Node>& nodes) {
  std::string bytes;
  pb::GlobalMetadata metadata;
  metadata.set_version("0.0.4");
  chakra::append_delimited(metadata, bytes);
  for (const pb::Node& node : nodes) chakra::append_delimited(node, bytes);
  return bytes;
}

pb::Node node(uint64_t id, pb::NodeType type, std::vector<uint64_t> deps = {}) {
  pb::Node n;
  n.set_id(id);
  n.set_type(type);
  n.set_name("n" + std::to_string(id));
  for (uint64_t dep : deps) n.add_data_deps(dep);
  return n;
}

// Sets attribute `name`, added or replaced.
void set_int(pb::Node& n, const std::string& name, int64_t value) {
  for (pb::AttributeProto& a : *n.mutable_attr())
    if (a.name() == name) return a.set_int64_val(value);
  pb::AttributeProto& a = *n.add_attr();
  a.set_name(name);
  a.set_int64_val(value);
}

void set_text(pb::Node& n, const std::string& name, const std::string& value) {
  pb::AttributeProto& a = *n.add_attr();
  a.set_name(name);
  a.set_string_val(value);
}

chakra::RankTrace decode(const std::string& bytes, int rank = 0, int ranks = 1,
                         const chakra::CommGroups& groups = {}, chakra::ImportOptions options = {}) {
  return chakra::decode_rank_trace(bytes, "t.0.et", rank, ranks, groups, options);
}

// The InputError's text when decoding `bytes` throws one, else "".
std::string refusal(const std::string& bytes, int ranks = 1, const chakra::CommGroups& groups = {}) {
  try {
    decode(bytes, 0, ranks, groups);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("import: a written trace reads back as the same programs", "[chakra]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  for (const Strategy* strategy : {&metp(), &ulysses_z(), &megatron_cz()}) {
    INFO(strategy->name());
    const steps::StepPrograms step = step_of(*strategy, 4096, gpt_8l(), cluster);
    const chakra::CommGroups groups = chakra::comm_groups_of(step.programs);
    const std::vector<std::string> files = encode_all(step.programs, groups, cluster);
    const costmodel::OpTimer timer(cluster, 8);
    for (int r = 0; r < 8; ++r) {
      const Program& original = step.programs[static_cast<std::size_t>(r)];
      const chakra::RankTrace read = decode(files[static_cast<std::size_t>(r)], r, 8, groups);
      const Program& back = read.program;
      CHECK(read.static_bytes == 7.0);
      CHECK(read.description == "test");
      REQUIRE(back.ops.size() == original.ops.size());
      for (std::size_t i = 0; i < back.ops.size(); ++i) {
        const Op& a = original.ops[i];
        const Op& b = back.ops[i];
        INFO("op " << i << " " << to_string(a.kind) << " " << original.label(a));
        REQUIRE(b.kind == a.kind);
        CHECK(b.kernel == a.kernel);
        CHECK(b.stream == a.stream);
        CHECK(b.phase == a.phase);
        CHECK(b.layer == a.layer);
        if (!original.label(a).empty()) CHECK(back.label(b) == original.label(a));
        CHECK(b.deps == a.deps);
        CHECK(b.flops == a.flops);
        CHECK(b.memory_bytes == a.memory_bytes);
        CHECK(b.size_bytes == a.size_bytes);
        CHECK(b.bus_bytes == Approx(a.bus_bytes).epsilon(1e-12));
        CHECK(b.ranks().first == a.ranks().first);
        CHECK(b.ranks().size == a.ranks().size);
        CHECK(b.send_to == a.send_to);
        CHECK(b.recv_from == a.recv_from);
        CHECK(b.dims == a.dims);
        CHECK(b.host_waits == a.host_waits);
        CHECK(b.partially_masked == a.partially_masked);
        if (a.kind == OpKind::broadcast || a.kind == OpKind::reduce) CHECK(b.root == a.root);
        if (!is_communication(a.kind)) CHECK(b.duration_s == timer.seconds(a));
      }
      REQUIRE(back.memory.size() == original.memory.size());
      for (std::size_t e = 0; e < back.memory.size(); ++e) {
        CHECK(back.memory[e].before_op == original.memory[e].before_op);
        CHECK(back.memory[e].bytes == original.memory[e].bytes);
      }
      CHECK(back.phases.size() >= 2 * static_cast<std::size_t>(gpt_8l().num_layers));
    }
    std::vector<chakra::RankTrace> ranks;
    for (int r = 0; r < 8; ++r) ranks.push_back(decode(files[static_cast<std::size_t>(r)], r, 8, groups));
    CHECK_NOTHROW(chakra::check_collectives_match(ranks, std::vector<std::string>(8, "f")));
  }
}

TEST_CASE("import: --price-compute prices paradyse's nodes by kind and shape, others by FLOPs and bytes",
          "[chakra]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const steps::StepPrograms step = step_of(megatron_ts(), 4096, gpt_8l(), cluster);
  const chakra::CommGroups groups = chakra::comm_groups_of(step.programs);
  const std::string file = encode_all(step.programs, groups, cluster).front();
  const chakra::RankTrace priced = decode(file, 0, 8, groups, {.price_compute = true});
  const costmodel::OpTimer timer(cluster, 8);
  for (std::size_t i = 0; i < priced.program.ops.size(); ++i) {
    CHECK(priced.program.ops[i].duration_s < 0);
    CHECK(timer.seconds(priced.program.ops[i]) == timer.seconds(step.programs.front().ops[i]));
  }

  // Another tool's nodes: a GEMM's FLOPs, a copy's bytes, no paradyse attributes.
  pb::Node gemm = node(10, pb::COMP_NODE);
  gemm.set_duration_micros(123);
  set_int(gemm, "num_ops", int64_t{2} * 4096 * 4096 * 4096);
  set_int(gemm, "tensor_size", int64_t{3} * 2 * 4096 * 4096);
  pb::Node copy = node(11, pb::COMP_NODE, {10});
  copy.set_duration_micros(45);
  set_int(copy, "tensor_size", int64_t{1} << 30);
  const std::string foreign = file_of({gemm, copy});
  const chakra::RankTrace recorded = decode(foreign);
  CHECK(recorded.program.ops[0].duration_s == Approx(123e-6));
  CHECK(recorded.program.ops[1].duration_s == Approx(45e-6));
  CHECK(recorded.program.ops[1].deps == OpDeps{0});
  const chakra::RankTrace estimated = decode(foreign, 0, 1, {}, {.price_compute = true});
  const double gemm_s = timer.seconds(estimated.program.ops[0]);
  const double peak_s = 2.0 * 4096 * 4096 * 4096 / cluster.gpu.bf16_flops_per_second;
  CHECK(gemm_s > peak_s);
  CHECK(gemm_s < 1.5 * peak_s);
  CHECK(timer.seconds(estimated.program.ops[1]) ==
        Approx(cluster.gpu.kernel_launch_s + (1 << 30) / cluster.gpu.hbm_bytes_per_second));
}

TEST_CASE("import: another tool's order, sends and receives, and collectives over every rank", "[chakra]") {
  // Rank 0 sends to rank 1, which receives, then both all-reduce over every rank (no pg_name); rank 0's
  // file lists the all-reduce before the send it depends on.
  pb::Node send = node(7, pb::COMM_SEND_NODE);
  set_int(send, "comm_dst", 1);
  set_int(send, "comm_size", 1000);
  set_int(send, "comm_tag", 5);
  pb::Node reduce0 = node(3, pb::COMM_COLL_NODE, {7});
  set_int(reduce0, "comm_type", pb::ALL_REDUCE);
  set_int(reduce0, "comm_size", 4000);
  pb::Node receive = node(1, pb::COMM_RECV_NODE);
  set_int(receive, "comm_src", 0);
  set_int(receive, "comm_size", 1000);
  set_int(receive, "comm_tag", 5);
  pb::Node reduce1 = node(2, pb::COMM_COLL_NODE, {1});
  set_int(reduce1, "comm_type", pb::ALL_REDUCE);
  set_int(reduce1, "comm_size", 4000);
  set_text(reduce1, "pg_name", "0");
  std::vector<chakra::RankTrace> ranks{decode(file_of({reduce0, send}), 0, 2),
                                       decode(file_of({receive, reduce1}), 1, 2)};
  const Program& zero = ranks[0].program;
  REQUIRE(zero.ops.size() == 2);
  CHECK(zero.ops[0].kind == OpKind::send_recv);
  CHECK(zero.ops[0].send_to == 1);
  CHECK(zero.ops[0].recv_from == -1);
  CHECK(zero.ops[1].kind == OpKind::all_reduce);
  CHECK(zero.ops[1].deps == OpDeps{0});
  CHECK(zero.ops[1].group_size == 2);
  CHECK(zero.ops[1].bus_bytes == Approx(4000.0));
  CHECK(ranks[0].node_of_op == std::vector<uint32_t>{1, 0});
  CHECK(ranks[1].program.ops[0].recv_from == 0);
  CHECK_NOTHROW(chakra::check_collectives_match(ranks, {"a.0.et", "a.1.et"}));

  // Rank 1 all-reduces a different size: refused by rank 1's file and node.
  set_int(reduce1, "comm_size", 8000);
  ranks[1] = decode(file_of({receive, reduce1}), 1, 2);
  try {
    chakra::check_collectives_match(ranks, {"a.0.et", "a.1.et"});
    FAIL("mismatched collectives accepted");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("a.1.et") && Catch::Contains("node[1]") &&
                             Catch::Contains("all_reduce of 4000 bytes"));
  }
}

TEST_CASE("import: a file cut short or holding other messages is refused by file and node", "[chakra]") {
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const steps::StepPrograms step = step_of(megatron_ts(), 4096, gpt_8l(), cluster);
  const chakra::CommGroups groups = chakra::comm_groups_of(step.programs);
  const std::string file = encode_all(step.programs, groups, cluster).front();
  const ParsedTrace parsed = parse_trace(file);
  // Cut inside node 5: after the metadata and nodes 0 to 4, and 3 bytes of node 5.
  std::string prefix;
  chakra::append_delimited(parsed.metadata, prefix);
  for (int i = 0; i < 5; ++i) chakra::append_delimited(parsed.nodes[static_cast<std::size_t>(i)], prefix);
  std::string node5;
  chakra::append_delimited(parsed.nodes[5], node5);
  CHECK_THAT(refusal(prefix + node5.substr(0, 3), 8, groups),
             Catch::Contains("t.0.et") && Catch::Contains("node[5]") && Catch::Contains("truncated"));
  CHECK_THAT(refusal(file.substr(0, 1)), Catch::Contains("metadata") && Catch::Contains("truncated"));
  CHECK_THAT(refusal(""), Catch::Contains("metadata"));

  // A metadata message where node 5 should be; a node where the metadata should be.
  std::string wrong = prefix;
  chakra::append_delimited(parsed.metadata, wrong);
  CHECK_THAT(refusal(wrong, 8, groups), Catch::Contains("node[5]") && Catch::Contains("Node message"));
  std::string headless;
  chakra::append_delimited(parsed.nodes[0], headless);
  CHECK_THAT(refusal(headless), Catch::Contains("metadata") && Catch::Contains("GlobalMetadata message"));
  CHECK_THAT(refusal(std::string("\x05garbage", 8)), Catch::Contains("metadata"));
}

TEST_CASE("import: nodes paradyse cannot run are refused by file, node and field", "[chakra]") {
  const auto refused = [](pb::Node n, const std::string& field, int ranks = 1,
                          chakra::CommGroups groups = {}) {
    const std::string why = refusal(file_of({node(0, pb::COMP_NODE), n}), ranks, groups);
    CHECK_THAT(why, Catch::Contains("t.0.et") && Catch::Contains("node[1]" + field));
  };
  refused(node(1, pb::METADATA_NODE), ".type");
  refused(node(1, pb::MEM_LOAD_NODE), ".tensor_size");  // a copy to or from host memory of no size
  refused(node(1, pb::COMP_NODE, {99}), ".data_deps");
  refused(node(0, pb::COMP_NODE), ".id");
  pb::Node self = node(1, pb::COMP_NODE);
  self.add_ctrl_deps(1);
  refused(self, ".ctrl_deps");
  pb::Node gather = node(1, pb::COMM_COLL_NODE);
  set_int(gather, "comm_type", pb::GATHER);
  set_int(gather, "comm_size", 8);
  refused(gather, ".comm_type");
  pb::Node unsized = node(1, pb::COMM_COLL_NODE);
  set_int(unsized, "comm_type", pb::ALL_GATHER);
  refused(unsized, ".comm_size", 2);
  pb::Node grouped = node(1, pb::COMM_COLL_NODE);
  set_int(grouped, "comm_type", pb::ALL_GATHER);
  set_int(grouped, "comm_size", 8);
  set_text(grouped, "pg_name", "3");
  refused(grouped, ".pg_name", 4, chakra::CommGroups{{{1, RankSet{0, 2, 1}}}});
  chakra::CommGroups elsewhere{{{3, RankSet{2, 2, 1}}}};
  refused(grouped, ".pg_name", 4, elsewhere);  // rank 0 is not in group 3
  pb::Node typed = node(1, pb::COMP_NODE);
  set_text(typed, "num_ops", "many");
  refused(typed, ".num_ops");
  pb::Node self_send = node(1, pb::COMM_SEND_NODE);
  set_int(self_send, "comm_dst", 0);
  set_int(self_send, "comm_size", 8);
  refused(self_send, ".comm_dst", 2);

  // A cycle: 1 waits on 2, which waits on 1.
  pb::Node a = node(1, pb::COMP_NODE, {2});
  pb::Node b = node(2, pb::COMP_NODE, {1});
  CHECK_THAT(refusal(file_of({node(0, pb::COMP_NODE), a, b})),
             Catch::Contains("node[1]") && Catch::Contains("cycle"));
}

TEST_CASE("import: comm-group files hold evenly spaced ranks of the job", "[chakra]") {
  const TempDir dir;
  const chakra::CommGroups groups =
      chakra::read_comm_groups(dir.write("g.json", R"({"0": [0, 1, 2, 3], "1": [0, 2], "7": [1, 3]})"), 4);
  REQUIRE(groups.by_id.size() == 2);
  CHECK(groups.by_id.at(1).stride == 2);
  CHECK(groups.by_id.at(7).first == 1);
  CHECK(chakra::comm_groups_json(groups) == "{\n  \"1\": [0, 2],\n  \"7\": [1, 3]\n}\n");
  const auto refused = [&](const std::string& text, const std::string& why) {
    try {
      chakra::read_comm_groups(dir.write("bad.json", text), 4);
      FAIL("accepted " << text);
    } catch (const InputError& e) {
      CHECK_THAT(e.what(), Catch::Contains("bad.json") && Catch::Contains(why));
    }
  };
  refused(R"({"1": [0, 1, 3]})", "evenly spaced");
  refused(R"({"1": [2, 1]})", "increasing");
  refused(R"({"1": [0, 4]})", "ranks of the job");
  refused(R"({"one": [0, 1]})", "group id");
  refused(R"({"1": []})", "non-empty");
  refused(R"([[0, 1]])", "object");
}

TEST_CASE("import: the ranks are the files from .0.et on, and a missing first file is named", "[chakra]") {
  const TempDir dir;
  const hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
  const steps::StepPrograms step = step_of(ulysses_z(), 4096, gpt_8l(), cluster);
  chakra::write_chakra_traces(step.programs, cluster, {"u", step.static_bytes}, dir.file("s"),
                              dir.file("g.json"));
  const chakra::ImportedJob job = chakra::read_chakra_traces(dir.file("s"), dir.file("g.json"));
  CHECK(job.programs.size() == 8);
  CHECK(job.static_bytes == step.static_bytes);
  CHECK(job.description == "u");
  std::filesystem::remove(dir.file("s.7.et"));
  try {  // seven files: rank 0's metadata says eight
    chakra::read_chakra_traces(dir.file("s"), dir.file("g.json"));
    FAIL("seven files of an eight-rank job accepted");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("s.0.et") && Catch::Contains("expected 7 ranks") && Catch::Contains("got 8"));
  }
  CHECK_THROWS_WITH(chakra::read_chakra_traces(dir.file("none"), dir.file("g.json")),
                    Catch::Contains("none.0.et") && Catch::Contains("no such file"));
}
