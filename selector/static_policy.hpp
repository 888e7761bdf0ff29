// static:NAME: every layer runs NAME without recomputation, whatever the length.
#pragma once

#include "selector/policy.hpp"

namespace paradyse::selector {

class StaticPolicy final : public Policy {
 public:
  StaticPolicy(const Strategy& strategy, CostSource& source);
  const std::string& name() const override { return name_; }
  using Policy::decide;
  Decision decide(const MicroBatch& micro_batch) override;

 private:
  const Strategy& strategy_;
  CostSource& source_;
  std::string name_;
};

}  // namespace paradyse::selector
