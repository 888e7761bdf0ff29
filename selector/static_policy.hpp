// static:NAME: every layer runs NAME without recomputation, whatever the length; static:NAME:RECOMPUTE
// every layer NAME with selective or full recomputation, or with its activations offloaded to host
// memory (priced as a whole program, since an offloaded layer's copies run under its neighbours);
// static:NAME:offload:K offloads the first K layers' only (Megatron-LM's --cpu-offloading-num-layers).
#pragma once

#include <optional>
#include <string>

#include "selector/policy.hpp"

namespace paradyse::selector {

struct StaticSpec {
  const Strategy* strategy = nullptr;
  Recompute recompute = Recompute::none;
  int offloaded_layers = 0;  // with offload: the first this many layers; 0: every layer
};

// nullopt when `name` does not start with "static:"; InputError naming --policy when what follows is not
// a strategy, optionally with ":selective", ":full" or ":offload" (recomputation the strategy has),
// the last optionally with ":K", a positive count of layers (the model checks it: PolicyOptions::build).
std::optional<StaticSpec> parse_static_policy(const std::string& name);
std::string static_policy_name(const StaticSpec& spec);

class StaticPolicy final : public Policy {
 public:
  // InputError naming --policy when `source` cannot price the strategy with that recomputation.
  StaticPolicy(const StaticSpec& spec, CostSource& source);
  const std::string& name() const override { return name_; }
  using Policy::decide;
  Decision decide(const MicroBatch& micro_batch) override;

 private:
  StaticSpec spec_;
  CostSource& source_;
  std::string name_;
};

}  // namespace paradyse::selector
