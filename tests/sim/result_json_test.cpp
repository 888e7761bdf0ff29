// The simulation result's JSON: the keys `paradyse simulate --json` has always printed, "oom_at" only
// when a rank ran out of memory, and not the recorded programs.
#include "sim/result_json.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "tests/json_keys.hpp"

using namespace paradyse;
using paradyse::testing::json_keys;

TEST_CASE("simulation JSON: the documented keys, the first out of memory only when there is one", "[sim]") {
  sim::SimulationResult r;
  r.plan = "metp";
  r.tokens = 4000;
  r.padded_tokens = 4096;
  r.batch = 2;
  r.micro_batches = 7;
  r.per_rank = {
      {.compute_s = 1, .exposed_comm_s = 2, .host_bound_s = 5, .idle_s = 3, .peak_memory_bytes = 4}};
  r.kernels = 10;
  r.flows = 20;
  r.analytic_collectives = 3;
  r.programs.resize(1);
  const std::set<std::string> fitting = {"plan",
                                         "seq",
                                         "padded_seq",
                                         "documents",
                                         "degree",
                                         "batch",
                                         "micro_batches",
                                         "iteration_time_s",
                                         "peak_memory_bytes",
                                         "host_peak_bytes",
                                         "capacity_bytes",
                                         "oom",
                                         "per_rank",
                                         "events",
                                         "kernels",
                                         "flows",
                                         "analytic_collectives"};
  nlohmann::json j = r;
  CHECK(json_keys(j) == fitting);
  CHECK(j.at("seq") == 4000);
  CHECK(j.at("padded_seq") == 4096);
  CHECK(j.at("batch") == 2);
  CHECK(j.at("micro_batches") == 7);
  CHECK(j.at("events") == 33);
  CHECK(j.at("per_rank") == nlohmann::json::array({{{"compute_s", 1.0},
                                                    {"exposed_comm_s", 2.0},
                                                    {"host_bound_s", 5.0},
                                                    {"idle_s", 3.0},
                                                    {"peak_memory_bytes", 4.0}}}));

  r.oom = true;
  r.oom_at = sim::OutOfMemory{.rank = 3,
                              .phase = Phase::layer_backward,
                              .layer = 5,
                              .op = "gemm qkv",
                              .bytes = 9e10,
                              .capacity = 8e10};
  j = r;
  CHECK(json_keys(j).size() == fitting.size() + 1);
  CHECK(j.at("oom_at") == nlohmann::json{{"rank", 3},
                                         {"phase", "layer_backward"},
                                         {"layer", 5},
                                         {"op", "gemm qkv"},
                                         {"bytes", 9e10},
                                         {"capacity_bytes", 8e10}});
}
