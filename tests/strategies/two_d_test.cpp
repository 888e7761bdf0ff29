// The 2-D strategies, USP (Ulysses × ring) and TP × CP (tensor parallel × ring): their collectives in
// closed form, the groups they run over, and their work and memory against the 1-D strategies they are
// made of.
#include <catch2/catch.hpp>

#include "strategies/library.hpp"
#include "tests/strategies/trace_helpers.hpp"

using namespace paradyse;
using namespace paradyse::testing;

namespace {

std::vector<ModelSpec> usp_models() {
  std::vector<ModelSpec> models;
  for (bool causal : {false, true}) {
    models.push_back(small_model(causal));
    models.push_back(small_model(causal, 8, MlpKind::swiglu));
    models.push_back(wide_gqa_model(causal));
  }
  return models;
}

// The inner group's size in a 2-D strategy's name: usp_u4 → 4, tp_cp_t2 → 2.
int inner_degree(const Strategy& strategy) {
  const std::string_view name = strategy.name();
  return std::stoi(std::string(name.substr(name.find_last_not_of("0123456789") + 1)));
}

// Bus bytes and count of a layer's collectives of `kind` over groups of `size` ranks `stride` apart.
struct GroupTotals {
  double bus_bytes = 0;
  int count = 0;
};
GroupTotals over_groups_of(const Program& program, OpKind kind, int size, int stride) {
  GroupTotals t;
  for (const Op& op : program.ops)
    if ((op.phase == Phase::layer_forward || op.phase == Phase::layer_backward) && op.kind == kind &&
        op.group_size == size && op.group_stride == stride) {
      t.bus_bytes += op.bus_bytes;
      ++t.count;
    }
  return t;
}

double usp_attention_flops(const Program& program) {
  double flops = 0;
  for (const Op& op : program.ops)
    if (op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward) flops += op.flops;
  return flops;
}

}  // namespace

TEST_CASE("USP: traced volume is Ulysses' all-to-alls over u, the ring over r = p/u, and ZeRO-3's 3(p−1)/p·Φ",
          "[strategies]") {
  int checked = 0;
  for (const ModelSpec& model : usp_models())
    for (const Strategy* usp : usp_strategies())
      for (int p : {4, 8, 16})
        for (int64_t b : {1, 2}) {
          if (usp->unsupported(model, p)) continue;
          const int u = inner_degree(*usp), r = p / u;
          const int64_t s = 16384;
          INFO(usp->name() << " causal " << model.causal << " kv_heads " << model.kv_heads << " p " << p
                           << " b " << b);
          const Totals t = layer_totals(trace_step(*usp, model, p, s, b));
          const double n = as_double(s / p), h = as_double(model.hidden), h_kv = as_double(model.kv_hidden());
          // Ulysses: q, k, v and out forward, d_out, dq, dk and dv backward, each b·n·(h or h_kv) bf16
          // elements, of which (u−1)/u leave the rank.
          const double all_to_all_bytes = (u - 1.0) / u * 2 * 2 * as_double(b) * n * (2 * h + 2 * h_kv);
          REQUIRE(t.count_by_kind.at(OpKind::all_to_all) == 8);
          REQUIRE(t.bus_bytes_by_kind.at(OpKind::all_to_all) == Approx(all_to_all_bytes).epsilon(1e-12));
          // Ring over r members, each block K and V of u·n tokens and a_kv/u heads (b·n·h_kv elements
          // each): bf16 forward and backward, fp32 accumulators, r−1 hops each: 16(r−1)·b·n·h_kv bytes.
          const double ring_bytes = 16 * (r - 1.0) * as_double(b) * n * h_kv;
          REQUIRE(t.count_by_kind.at(OpKind::send_recv) == 6 * (r - 1));
          REQUIRE(t.bus_bytes_by_kind.at(OpKind::send_recv) == Approx(ring_bytes).epsilon(1e-12));
          // ZeRO-3 over all p ranks, independent of s.
          const double phi_bytes = 2 * layer_matrix_elements(model), fraction = (p - 1.0) / p;
          REQUIRE(t.bus_bytes_by_kind.at(OpKind::all_gather) ==
                  Approx(2 * fraction * phi_bytes).epsilon(1e-12));
          REQUIRE(t.bus_bytes_by_kind.at(OpKind::reduce_scatter) ==
                  Approx(fraction * phi_bytes).epsilon(1e-12));
          REQUIRE(t.bus_bytes ==
                  Approx(all_to_all_bytes + ring_bytes + 3 * fraction * phi_bytes).epsilon(1e-12));
          // Every started communication is waited exactly once.
          REQUIRE(t.count_by_kind.at(OpKind::wait) == 8 + 6 * (r - 1) + 8 + 4);
          ++checked;
        }
  REQUIRE(checked > 20);
}

TEST_CASE("USP: all-to-alls stay inside u consecutive ranks, the ring links every u-th rank",
          "[strategies]") {
  // Rank q's Ulysses group is ranks u·⌊q/u⌋ … u·⌊q/u⌋ + u − 1; its ring is ranks q mod u + u·j, and it is
  // member ⌊q/u⌋ of that ring, sending to member ⌊q/u⌋ + 1 and receiving from ⌊q/u⌋ − 1 (mod r).
  const ModelSpec model = small_model(true);
  const int p = 8;
  for (const Strategy* usp : {find_strategy("usp_u2"), find_strategy("usp_u4")}) {
    const int u = inner_degree(*usp), r = p / u;
    std::vector<double> first_sizes;
    for (int rank = 0; rank < p; ++rank) {
      INFO(usp->name() << " rank " << rank);
      const Program program = trace_step(*usp, model, p, 4096, 1, Recompute::none, rank);
      const int member = rank / u;
      std::vector<double> sizes;
      for (const Op& op : program.ops) {
        if (op.phase != Phase::layer_forward && op.phase != Phase::layer_backward) continue;
        if (op.kind == OpKind::all_to_all) {
          CHECK(op.group_first == member * u);
          CHECK(op.group_size == u);
          CHECK(op.group_stride == 1);
        } else if (op.kind == OpKind::send_recv) {
          CHECK(op.group_first == rank % u);
          CHECK(op.group_size == r);
          CHECK(op.group_stride == u);
          CHECK(op.send_to == (member + 1) % r);
          CHECK(op.recv_from == (member - 1 + r) % r);
          sizes.push_back(op.size_bytes);
        } else if (is_communication(op.kind)) {
          CHECK(op.group_size == p);  // ZeRO-3 over the whole group
        }
      }
      // A send only meets its receive if every rank issues the same exchanges in the same order.
      REQUIRE(sizes.size() == static_cast<std::size_t>(6 * (r - 1)));
      if (rank == 0) first_sizes = sizes;
      REQUIRE(sizes == first_sizes);
    }
  }
}

TEST_CASE("USP: each rank computes MegatronCZ's attention work and keeps UlyssesZ's activations",
          "[strategies]") {
  // A member of the ring holds its group's zig-zag chunks, so causal work stays balanced: a/u heads of
  // u·s/p queries against the sequence is, on every rank, what MegatronCZ's a heads of s/p queries are.
  // What it keeps is UlyssesZ's tensor for tensor: q, k, v and out by heads, out by tokens, the lse.
  for (const ModelSpec& model : usp_models())
    for (const Strategy* usp : usp_strategies())
      for (int p : {4, 8}) {
        if (usp->unsupported(model, p)) continue;
        INFO(usp->name() << " causal " << model.causal << " kv_heads " << model.kv_heads << " p " << p);
        for (int rank : {0, p - 1}) {
          const Program program = trace_step(*usp, model, p, 8192, 1, Recompute::none, rank);
          CHECK(
              usp_attention_flops(program) ==
              Approx(usp_attention_flops(trace_step(megatron_cz(), model, p, 8192, 1, Recompute::none, rank)))
                  .epsilon(1e-12));
          CHECK(phase_memory_delta(program, Phase::layer_forward, 0) ==
                phase_memory_delta(trace_step(ulysses_z(), model, p, 8192, 1, Recompute::none, rank),
                                   Phase::layer_forward, 0));
        }
      }
}

TEST_CASE("USP: refuses splits without two Ulysses groups, naming the split", "[strategies]") {
  const ModelSpec model = small_model(true);
  const Strategy& u4 = *find_strategy("usp_u4");
  CHECK_FALSE(u4.unsupported(model, 8).has_value());
  REQUIRE(u4.unsupported(model, 4).has_value());
  CHECK_THAT(*u4.unsupported(model, 4), Catch::Contains("ulysses_z"));
  REQUIRE(u4.unsupported(model, 2).has_value());
  CHECK_THAT(*u4.unsupported(model, 2), Catch::Contains("groups of 4"));
  REQUIRE(u4.unsupported(model, 6).has_value());  // 6 ranks are not groups of 4
}

TEST_CASE(
    "TP × CP: traced volume is MegatronTS's over t, the ring over r = p/t, and ZeRO-3 of the TP shard over r",
    "[strategies]") {
  int checked = 0;
  for (const ModelSpec& model : usp_models())
    for (const Strategy* tp_cp : tp_cp_strategies())
      for (int p : {4, 8, 16})
        for (int64_t b : {1, 2}) {
          if (tp_cp->unsupported(model, p)) continue;
          const int t = inner_degree(*tp_cp), r = p / t;
          const int64_t s = 16384;
          INFO(tp_cp->name() << " causal " << model.causal << " kv_heads " << model.kv_heads << " p " << p
                             << " b " << b);
          const Program program = trace_step(*tp_cp, model, p, s, b);
          const double n = as_double(s / p), h = as_double(model.hidden), h_kv = as_double(model.kv_hidden());
          // Tensor parallel over t ranks on the group's t·n tokens: MegatronTS's 10(t−1)/t·b·(t·n)·h bf16
          // elements, in 6 all-gathers and 4 reduce-scatters.
          const GroupTotals tp_gathers = over_groups_of(program, OpKind::all_gather, t, 1);
          const GroupTotals tp_scatters = over_groups_of(program, OpKind::reduce_scatter, t, 1);
          CHECK(tp_gathers.count == 6);
          CHECK(tp_scatters.count == 4);
          CHECK(tp_gathers.bus_bytes + tp_scatters.bus_bytes ==
                Approx(2 * 10 * (t - 1.0) * as_double(b) * n * h).epsilon(1e-12));
          // Ring over r members, blocks of b·n·h_kv elements: 16(r−1)·b·n·h_kv bytes.
          const Totals all = layer_totals(program);
          CHECK(all.count_by_kind.at(OpKind::send_recv) == 6 * (r - 1));
          CHECK(all.bus_bytes_by_kind.at(OpKind::send_recv) ==
                Approx(16 * (r - 1.0) * as_double(b) * n * h_kv).epsilon(1e-12));
          // The TP shard (Φ_layer/t) gathered over the ring forward and backward, its gradient
          // reduce-scattered: 3(r−1)/r·Φ_layer/t bf16 elements in 8 gathers and 4 reduce-scatters.
          const GroupTotals weight_gathers = over_groups_of(program, OpKind::all_gather, r, t);
          const GroupTotals weight_scatters = over_groups_of(program, OpKind::reduce_scatter, r, t);
          CHECK(weight_gathers.count == 8);
          CHECK(weight_scatters.count == 4);
          CHECK(weight_gathers.bus_bytes + weight_scatters.bus_bytes ==
                Approx(2 * 3 * (r - 1.0) / r * layer_matrix_elements(model) / t).epsilon(1e-12));
          CHECK(all.bus_bytes ==
                Approx(2 * 10 * (t - 1.0) * as_double(b) * n * h + 16 * (r - 1.0) * as_double(b) * n * h_kv +
                       2 * 3 * (r - 1.0) / r * layer_matrix_elements(model) / t)
                    .epsilon(1e-12));
          CHECK(all.count_by_kind.at(OpKind::wait) == 6 * (r - 1) + 14 + 8);
          ++checked;
        }
  REQUIRE(checked > 20);
}

TEST_CASE("TP × CP: activations gathered inside t consecutive ranks, weights and the ring over every t-th",
          "[strategies]") {
  const ModelSpec model = small_model(true);
  const int p = 8;
  for (const Strategy* tp_cp : {find_strategy("tp_cp_t2"), find_strategy("tp_cp_t4")}) {
    const int t = inner_degree(*tp_cp), r = p / t;
    for (int rank = 0; rank < p; ++rank) {
      INFO(tp_cp->name() << " rank " << rank);
      const Program program = trace_step(*tp_cp, model, p, 4096, 1, Recompute::none, rank);
      const int member = rank / t;
      for (const Op& op : program.ops) {
        if (!is_communication(op.kind) ||
            (op.phase != Phase::layer_forward && op.phase != Phase::layer_backward))
          continue;
        const bool over_tp = op.group_first == member * t && op.group_size == t && op.group_stride == 1;
        const bool over_ring = op.group_first == rank % t && op.group_size == r && op.group_stride == t;
        CHECK((over_tp || over_ring));
        if (op.kind == OpKind::send_recv) {
          CHECK(over_ring);
          CHECK(op.send_to == (member + 1) % r);
          CHECK(op.recv_from == (member - 1 + r) % r);
        }
      }
    }
  }
}

TEST_CASE("TP × CP: each rank computes MegatronCZ's attention work and MegatronTS's GEMMs over t",
          "[strategies]") {
  // A TP rank computes a/t heads of its group's t·s/p queries: per rank, what MegatronCZ's a heads of s/p
  // queries are; and a 1/t shard of every GEMM over t·s/p tokens, a p-th of the layer's GEMM FLOPs.
  for (const ModelSpec& model : usp_models())
    for (const Strategy* tp_cp : tp_cp_strategies())
      for (int p : {4, 8}) {
        if (tp_cp->unsupported(model, p)) continue;
        INFO(tp_cp->name() << " causal " << model.causal << " kv_heads " << model.kv_heads << " p " << p);
        const Program program = trace_step(*tp_cp, model, p, 8192, 1, Recompute::none, p - 1);
        CHECK(
            usp_attention_flops(program) ==
            Approx(usp_attention_flops(trace_step(megatron_cz(), model, p, 8192, 1, Recompute::none, p - 1)))
                .epsilon(1e-12));
        CHECK(layer_totals(program).flops - usp_attention_flops(program) ==
              Approx(3 * gemm_forward_flops(model, 8192) / p).epsilon(1e-9));
      }
}
