// Cost tables built by hand, for checking each decision of the selector on a case where it matters.
#pragma once

#include <map>
#include <string>

#include "selector/cost_source.hpp"
#include "strategies/library.hpp"

namespace paradyse::testing {

// One layer that keeps `saved` bytes from forward to backward and peaks `forward_peak` above its
// start in the forward and `backward_peak` above its start in the backward.
inline steps::Candidate layer(const Strategy& strategy, double seconds, double saved, double forward_peak,
                              double backward_peak, Recompute recompute = Recompute::none) {
  steps::Candidate c;
  c.strategy = &strategy;
  c.recompute = recompute;
  c.layer.seconds = seconds;
  c.layer.forward = {forward_peak, saved};
  c.layer.backward = {backward_peak, -saved};
  return c;
}

// Nothing but the layers: no static terms, no fragmentation, the rest of the step free.
inline steps::CostTable table(int num_layers, double capacity, std::vector<steps::Candidate> candidates,
                              int64_t tokens = 1000) {
  steps::CostTable t;
  t.num_layers = num_layers;
  t.tokens = t.padded_tokens = tokens;
  t.degree = 8;
  t.step.capacity_bytes = capacity;
  t.candidates = std::move(candidates);
  return t;
}

// Serves the tables it was given, by length, keeping only the candidates a policy asks for.
class TableSource final : public selector::CostSource {
 public:
  explicit TableSource(std::map<int64_t, steps::CostTable> tables) : tables_(std::move(tables)) {}
  std::string name() const override { return "constructed"; }
  int64_t batch() const override { return 1; }
  steps::CostTable table(const MicroBatch& micro_batch,
                         const std::vector<selector::CandidateKey>& wanted) override {
    ++requests;
    steps::CostTable t = tables_.at(micro_batch.tokens());
    std::erase_if(t.candidates, [&](const steps::Candidate& c) {
      return std::find(wanted.begin(), wanted.end(), selector::CandidateKey{c.strategy, c.recompute}) ==
             wanted.end();
    });
    return t;
  }
  bool prices(const selector::CandidateKey&) const override { return true; }
  int requests = 0;

 private:
  std::map<int64_t, steps::CostTable> tables_;
};

inline std::string names(const Plan& plan) {
  return plan.empty() ? "" : plan_name(plan);
}

}  // namespace paradyse::testing
