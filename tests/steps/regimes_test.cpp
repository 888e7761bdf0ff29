// The regimes the paper reports, on its setting: the GPT-3 shape (gpt-8l) on one 8×A100 node.
#include <catch2/catch.hpp>

#include "steps/estimate.hpp"
#include "strategies/library.hpp"

using namespace paradyse;

namespace {

struct Setting {
  steps::Estimator estimator{load_model("gpt-8l"), hw::load_cluster("dgx-a100")};
  // Every strategy that runs on the node's 8 GPUs.
  std::vector<const Strategy*> strategies = strategies_for(estimator.model(), 8);

  steps::Estimate at(const Strategy& strategy, int64_t tokens) {
    return estimator.estimate(strategy, {.tokens = tokens});
  }
  double seconds(const Strategy& strategy, int64_t tokens) { return at(strategy, tokens).time.total_s; }
};

}  // namespace

TEST_CASE("regimes: megatron_ts is fastest on short sequences", "[costmodel]") {
  // At a few thousand tokens the activations are small, so TP+SP's all-gathers are cheap, while every
  // ZeRO-3 strategy moves each layer's 1.8 G weights three times and METP broadcasts them.
  Setting setting;
  for (int64_t tokens : {2048, 4096}) {
    const double ts = setting.seconds(megatron_ts(), tokens);
    for (const Strategy* other : setting.strategies) {
      if (other == &megatron_ts()) continue;
      INFO(other->name() << " at " << tokens);
      REQUIRE(ts < setting.seconds(*other, tokens));
    }
  }
}

TEST_CASE("regimes: a ZeRO-3 sequence strategy is fastest on long sequences", "[costmodel]") {
  // At 128K tokens and beyond, TP+SP moves 10·b·s·h activations per layer, growing with s, while
  // ZeRO-3's weight traffic is fixed and Ulysses' all-to-alls move 1/p of that; ring attention's K/V
  // blocks hide behind the quadratic attention compute.
  Setting setting;
  for (int64_t tokens : {131072, 262144}) {
    const double best_zero3 =
        std::min(setting.seconds(ulysses_z(), tokens), setting.seconds(megatron_cz(), tokens));
    INFO("at " << tokens);
    REQUIRE(best_zero3 < setting.seconds(megatron_ts(), tokens));
  }
}

TEST_CASE("regimes: metp has the lowest peak memory on long sequences", "[costmodel]") {
  // METP keeps only each layer's input (2·b·s·h/p bytes) and never holds a whole weight or the whole
  // sequence; the others keep about 34·b·s·h/p per layer.
  Setting setting;
  for (int64_t tokens : {65536, 131072, 262144}) {
    const double metp_peak = setting.at(metp(), tokens).memory.peak_bytes;
    for (const Strategy* other : setting.strategies) {
      if (other == &metp()) continue;
      INFO(other->name() << " at " << tokens);
      REQUIRE(metp_peak < setting.at(*other, tokens).memory.peak_bytes);
    }
  }
}

TEST_CASE("regimes: colossal_z runs out of memory first", "[costmodel]") {
  // Its materialised [b, a, s/p, s] probabilities grow with s²; everything else grows with s.
  Setting setting;
  auto first_oom = [&](const Strategy& strategy) {
    for (int64_t tokens = 4096; tokens <= (int64_t{1} << 22); tokens *= 2)
      if (!setting.at(strategy, tokens).fits) return tokens;
    return int64_t{1} << 23;
  };
  const int64_t colossal = first_oom(colossal_z());
  for (const Strategy* other : setting.strategies) {
    if (other == &colossal_z()) continue;
    INFO(other->name());
    REQUIRE(colossal < first_oom(*other));
  }
}
