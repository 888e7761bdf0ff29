// The estimate's JSON: the keys `paradyse estimate --json` has always printed, each carrying its field.
#include "steps/estimate_json.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "tests/json_keys.hpp"

using namespace paradyse;
using paradyse::testing::json_keys;

TEST_CASE("estimate JSON: every documented key, each carrying its own field", "[costmodel]") {
  // A different value in every field, so that two keys swapped would show.
  steps::Estimate e{.plan = "megatron_ts",
                    .tokens = 4000,
                    .padded_tokens = 4096,
                    .degree = 8,
                    .batch = 2,
                    .micro_batches = 7,
                    .time = {.forward_s = 1,
                             .backward_s = 2,
                             .optimizer_s = 3,
                             .total_s = 6,
                             .compute_s = 5,
                             .exposed_communication_s = 0.25,
                             .host_bound_s = 0.75},
                    .memory = {.weights_bytes = 10,
                               .gradients_bytes = 11,
                               .optimizer_states_bytes = 12,
                               .saved_activations_bytes = 13,
                               .transient_bytes = 14,
                               .fragmentation_bytes = 15,
                               .peak_bytes = 75,
                               .capacity_bytes = 80,
                               .offloaded_bytes = 16,
                               .host_capacity_bytes = 90},
                    .fits = true,
                    .flops = 1e15,
                    .model_flops = 9e14,
                    .mfu = 0.4,
                    .comm_bytes = 3e9};
  const nlohmann::json j = e;
  CHECK(json_keys(j) == std::set<std::string>{"plan", "seq", "padded_seq", "documents", "degree", "batch",
                                              "micro_batches", "time_s", "memory_bytes", "fits", "flops",
                                              "model_flops", "mfu", "comm_bytes"});
  CHECK(j.at("seq") == 4000);
  CHECK(j.at("batch") == 2);
  CHECK(j.at("micro_batches") == 7);
  CHECK(j.at("padded_seq") == 4096);
  CHECK(j.at("documents") == 1);
  CHECK(j.at("time_s") == nlohmann::json{{"total", 6.0},
                                         {"forward", 1.0},
                                         {"backward", 2.0},
                                         {"optimizer", 3.0},
                                         {"compute", 5.0},
                                         {"exposed_communication", 0.25},
                                         {"host_bound", 0.75}});
  CHECK(j.at("memory_bytes") == nlohmann::json{{"peak", 75.0},
                                               {"capacity", 80.0},
                                               {"weights", 10.0},
                                               {"gradients", 11.0},
                                               {"optimizer_states", 12.0},
                                               {"saved_activations", 13.0},
                                               {"transient", 14.0},
                                               {"fragmentation", 15.0},
                                               {"offloaded", 16.0},
                                               {"host_capacity", 90.0}});
  CHECK(j.at("mfu") == 0.4);
  CHECK(j.at("comm_bytes") == 3e9);
}
