#include "evaluation/grouped_step_option.hpp"

#include <algorithm>
#include <charconv>
#include <vector>

#include "common/errors.hpp"
#include "evaluation/options.hpp"
#include "strategies/micro_batch.hpp"

namespace paradyse::evaluation {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(separator, start), text.size());
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

[[noreturn]] void refuse(const std::string& what, const std::string& got) {
  throw InputError("--groups", 0, "",
                   "expected " + what +
                       " (rounds separated by '/', groups by ',', each DEGREE:TOKENS, e.g. "
                       "4:16K,2:8K,2:4K+4K/8:32K), got '" +
                       got + "'");
}

GroupWork parse_group(const std::string& text, int first_rank, const ModelSpec& model, const Plan& plan) {
  const std::size_t colon = text.find(':');
  if (colon == std::string::npos) refuse("a group DEGREE:TOKENS", text);
  int degree = 0;
  const char* end = text.data() + colon;
  const auto [rest, error] = std::from_chars(text.data(), end, degree);
  if (error != std::errc() || rest != end || degree < 1)
    refuse("a group's degree, a positive whole number", text);
  std::vector<int64_t> documents;
  for (const std::string& length : split(text.substr(colon + 1), '+'))
    documents.push_back(parse_length(length, "--groups"));
  const MicroBatch micro_batch{documents};
  GroupWork group;
  group.first_rank = first_rank;
  group.degree = degree;
  group.micro_batch.model = &model;
  group.micro_batch.plan = plan;
  const std::vector<int64_t> padded = micro_batch.padded_documents(degree, model.causal);
  for (const int64_t length : padded) group.micro_batch.tokens += length;
  if (padded.size() > 1) group.micro_batch.documents = padded;
  return group;
}

}  // namespace

GroupedStepSpec parse_grouped_step(const std::string& text, const ModelSpec& model, const Plan& plan) {
  GroupedStepSpec spec;
  spec.model = &model;
  spec.num_layers = static_cast<int>(plan.size());
  for (const std::string& round_text : split(text, '/')) {
    Round round;
    int next = 0;
    for (const std::string& group : split(round_text, ',')) {
      round.push_back(parse_group(group, next, model, plan));
      next += round.back().degree;
    }
    spec.rounds.push_back(std::move(round));
  }
  return spec;
}

int parse_shard_group(const std::string& name, const hw::ClusterSpec& cluster, int job) {
  if (name == "job") return job;
  if (name == "node") return std::min(cluster.gpus_per_node, job);
  throw InputError("--shard-group", 0, "", "expected job or node, got '" + name + "'");
}

DType parse_gradient_reduce_dtype(const std::string& name) {
  if (const std::optional<DType> dtype = gradient_reduce_dtype_named(name)) return *dtype;
  throw InputError("--gradient-reduce-dtype", 0, "", "expected bf16 or fp32, got '" + name + "'");
}

}  // namespace paradyse::evaluation
