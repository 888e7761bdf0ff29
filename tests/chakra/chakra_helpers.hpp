// What the Chakra tests share: a step's programs on a preset, and a trace file parsed the way Chakra's
// own tools parse it (length-delimited messages of the generated et_def.proto classes), not through
// paradyse's reader.
#pragma once

#include <google/protobuf/io/coded_stream.h>

#include <string>
#include <vector>

#include "et_def.pb.h"
#include "hw_models/cluster.hpp"
#include "steps/step_programs.hpp"
#include "strategies/library.hpp"

namespace paradyse::testing {

inline const ModelSpec& gpt_8l() {
  static const ModelSpec model = load_model("gpt-8l");
  return model;
}

inline steps::StepPrograms step_of(const Strategy& strategy, int64_t tokens, const ModelSpec& model,
                                   const hw::ClusterSpec& cluster) {
  return steps::trace_plan_step(model, cluster, uniform_plan(strategy, model.num_layers), {.tokens = tokens});
}

struct ParsedTrace {
  chakra::pb::GlobalMetadata metadata;
  std::vector<chakra::pb::Node> nodes;
};

// Parses a whole file as Chakra's decode_message reads it; fails the test on bytes left over.
inline ParsedTrace parse_trace(const std::string& bytes) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  ParsedTrace trace;
  const auto read = [&](google::protobuf::Message& message) {
    uint32_t size = 0;
    if (!in.ReadVarint32(&size)) return false;
    const auto limit = in.PushLimit(static_cast<int>(size));
    const bool parsed = message.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
    in.PopLimit(limit);
    return parsed;
  };
  if (!read(trace.metadata)) throw std::runtime_error("no metadata");
  while (in.CurrentPosition() < static_cast<int>(bytes.size())) {
    chakra::pb::Node node;
    if (!read(node)) throw std::runtime_error("a node that does not parse");
    trace.nodes.push_back(std::move(node));
  }
  return trace;
}

inline const chakra::pb::AttributeProto* find_attr(const chakra::pb::Node& node, const std::string& name) {
  for (const chakra::pb::AttributeProto& a : node.attr())
    if (a.name() == name) return &a;
  return nullptr;
}

inline int64_t int_attr(const chakra::pb::Node& node, const std::string& name) {
  const chakra::pb::AttributeProto* a = find_attr(node, name);
  if (a == nullptr) throw std::runtime_error("no attribute " + name + " on node " + node.name());
  return a->int64_val();
}

}  // namespace paradyse::testing
