#include "evaluation/sweep_spec.hpp"

#include <fmt/format.h>

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/json_input.hpp"
#include "common/limits.hpp"
#include "common/units.hpp"
#include "evaluation/group_compare.hpp"
#include "traces/trace.hpp"

namespace paradyse::evaluation {

namespace {

using OrderedJson = nlohmann::ordered_json;

const std::vector<std::string> kAxes = {"cluster",
                                        "framework",
                                        "attention_implementation",
                                        "nodes",
                                        "degree",
                                        "nvlink_scale",
                                        "nic_scale",
                                        "hbm_gib",
                                        "oversubscription",
                                        "nvlink_domain",
                                        "model",
                                        "trace",
                                        "global_batch",
                                        "global_batch_tokens",
                                        "micro_batch_tokens",
                                        "shard_group",
                                        "gradient_reduce_dtype"};
const std::vector<std::string> kBaseKeys = {"model",
                                            "cluster",
                                            "framework",
                                            "attention_implementation",
                                            "nodes",
                                            "degree",
                                            "trace",
                                            "policies",
                                            "order",
                                            "seed",
                                            "limit",
                                            "sample",
                                            "engine",
                                            "grid_ratio",
                                            "global_batch",
                                            "max_len",
                                            "over",
                                            "global_batch_tokens",
                                            "micro_batch_tokens",
                                            "group_policies",
                                            "shard_group",
                                            "gradient_reduce_dtype",
                                            "tune_statics",
                                            "mode",
                                            "plan_lengths"};

// length: a positive integer, or text as --seq takes it ("64K"), read by parse_length when the job runs.
enum class Kind { text, count, non_negative_count, factor, length };

Kind kind_of(const std::string& key) {
  if (key == "nodes" || key == "limit") return key == "limit" ? Kind::non_negative_count : Kind::count;
  if (key == "degree" || key == "global_batch" || key == "nvlink_domain") return Kind::count;
  if (key == "seed") return Kind::non_negative_count;
  if (key == "max_len" || key == "global_batch_tokens" || key == "micro_batch_tokens") return Kind::length;
  if (key == "nvlink_scale" || key == "nic_scale" || key == "hbm_gib" || key == "sample" ||
      key == "grid_ratio" || key == "oversubscription")
    return Kind::factor;
  return Kind::text;
}

void check_value(const std::string& path, const std::string& field, const OrderedJson& value, Kind kind) {
  const auto fail = [&](const std::string& expected) {
    throw InputError(path, 0, field, "expected " + expected + ", got " + value.dump());
  };
  switch (kind) {
    case Kind::text:
      if (!value.is_string() || value.get<std::string>().empty()) fail("a non-empty string");
      break;
    case Kind::count:
      // Counts of nodes, GPUs and sequences: past 2^31 - 1 a typo, and past an int.
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > INT32_MAX)
        fail("a positive integer up to 2147483647");
      break;
    case Kind::non_negative_count:
      if (!value.is_number_integer() || value.get<int64_t>() < 0) fail("a non-negative integer");
      break;
    case Kind::factor:
      if (!value.is_number() || !(value.get<double>() > 0) || !std::isfinite(value.get<double>()))
        fail("a positive finite number");
      break;
    case Kind::length:
      if (!(value.is_number_integer() && value.get<int64_t>() >= 1) &&
          !(value.is_string() && !value.get<std::string>().empty()))
        fail("a length: a positive integer or text such as \"64K\"");
      break;
  }
}

OrderedJson from_toml(const toml::node& node) {
  if (const auto* table = node.as_table()) {
    OrderedJson out = OrderedJson::object();
    for (const auto& [key, value] : *table) out[std::string(key.str())] = from_toml(value);
    return out;
  }
  if (const auto* array = node.as_array()) {
    OrderedJson out = OrderedJson::array();
    for (const auto& value : *array) out.push_back(from_toml(value));
    return out;
  }
  if (const auto* v = node.as_string()) return v->get();
  if (const auto* v = node.as_integer()) return v->get();
  if (const auto* v = node.as_floating_point()) return v->get();
  if (const auto* v = node.as_boolean()) return v->get();
  return nullptr;  // dates and times: no key takes them, so validation names the field
}

OrderedJson read_spec(const std::string& path) {
  if (path.ends_with(".toml")) {
    try {
      return from_toml(toml::parse(
          read_input_file(path, {.kind = "sweep spec", .max_bytes = kMaxSettingsFileBytes}), path));
    } catch (const toml::parse_error& e) {
      throw InputError(path, static_cast<int>(e.source().begin.line), "", std::string(e.description()));
    }
  }
  return json_input::load_file(path);
}

std::string id_value(const OrderedJson& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// `cluster` as the settings' cluster keys change it.
hw::ClusterSpec varied_cluster(const OrderedJson& settings, hw::ClusterSpec cluster) {
  const auto scale = [](hw::FabricSpec& fabric, double factor) {
    fabric.bytes_per_second *= factor;
    for (hw::Curve* curve :
         {&fabric.bus_bandwidth_by_bytes, &fabric.all_gather_bus_bandwidth_by_bytes,
          &fabric.reduce_scatter_bus_bandwidth_by_bytes, &fabric.send_recv_bandwidth_by_bytes}) {
      if (curve->points().empty()) continue;
      std::vector<std::pair<double, double>> scaled = curve->points();
      for (auto& [bytes, bandwidth] : scaled) bandwidth *= factor;
      *curve = hw::Curve(scaled);
    }
  };
  scale(cluster.intra_node, settings.value("nvlink_scale", 1.0));
  scale(cluster.inter_node, settings.value("nic_scale", 1.0));
  if (settings.contains("hbm_gib")) cluster.gpu.hbm_bytes = settings.at("hbm_gib").get<double>() * kGiB;
  cluster.spine_oversubscription = settings.value("oversubscription", 1.0);
  hw::check_spine_oversubscription(cluster);
  if (settings.contains("nvlink_domain")) {
    // The node is the NVLink domain: that many GPUs under one NVSwitch fabric, each with the preset's
    // share of NICs, every per-GPU figure as the preset gives it.
    const int64_t domain = settings.at("nvlink_domain").get<int64_t>();
    if (cluster.network || domain * cluster.nics_per_node % cluster.gpus_per_node != 0)
      throw InputError(
          "", 0, "nvlink_domain",
          "expected a domain size that keeps " + cluster.name + "'s " +
              std::to_string(cluster.nics_per_node) + " NICs per " + std::to_string(cluster.gpus_per_node) +
              " GPUs whole, on a cluster without a network graph, got " + std::to_string(domain));
    cluster.nics_per_node = static_cast<int>(domain * cluster.nics_per_node / cluster.gpus_per_node);
    cluster.gpus_per_node = static_cast<int>(domain);
  }
  return cluster;
}

}  // namespace

SweepSpec load_sweep_spec(const std::string& path, bool plan_only) {
  const OrderedJson json = read_spec(path);
  SweepSpec spec;
  spec.path = path;
  if (!json.is_object()) throw InputError(path, 0, "", "expected an object with 'base' and 'axes'");
  for (const auto& [key, value] : json.items())
    if (key != "base" && key != "axes")
      throw InputError(path, 0, key, "unknown key; expected 'base' and 'axes'");
  if (!json.contains("axes") || !json.at("axes").is_object() || json.at("axes").empty())
    throw InputError(path, 0, "axes", "expected an object with at least one axis");
  spec.base = json.value("base", OrderedJson::object());
  if (!spec.base.is_object()) throw InputError(path, 0, "base", "expected an object");
  const OrderedJson base_as_written = spec.base;  // the loop below rewrites a list of policies in spec.base
  for (const auto& [key, value] : base_as_written.items()) {
    if (std::find(kBaseKeys.begin(), kBaseKeys.end(), key) == kBaseKeys.end())
      throw InputError(path, 0, "base." + key,
                       "unknown key; expected one of " + fmt::format("{}", fmt::join(kBaseKeys, ", ")));
    if (key == "policies" && value.is_array()) {  // TOML users write a list: the same as "a,b"
      if (value.empty()) throw InputError(path, 0, "base.policies", "expected a non-empty list");
      std::vector<std::string> names;
      for (std::size_t i = 0; i < value.size(); ++i) {
        check_value(path, fmt::format("base.policies[{}]", i), value[i], Kind::text);
        names.push_back(value[i].get<std::string>());
      }
      spec.base["policies"] = fmt::format("{}", fmt::join(names, ","));
      continue;
    }
    if (key == "plan_lengths") {  // whole numbers, or text as --seq takes it ("16K")
      if (!value.is_array() || value.empty())
        throw InputError(path, 0, "base.plan_lengths", "expected a non-empty list");
      std::vector<int64_t> lengths;
      for (std::size_t i = 0; i < value.size(); ++i) {
        const std::string field = fmt::format("base.plan_lengths[{}]", i);
        if (!value[i].is_string() && !value[i].is_number_integer())
          throw InputError(path, 0, field, "expected a length (4096 or \"16K\"), got " + value[i].dump());
        try {
          lengths.push_back(parse_length(id_value(value[i]), field));
        } catch (const InputError& e) {
          throw InputError(path, 0, field, e.message());
        }
      }
      spec.base["plan_lengths"] = lengths;
      continue;
    }
    check_value(path, "base." + key, value, kind_of(key));
  }
  if (plan_only) spec.base["mode"] = "plan";
  const std::string mode = spec.base.value("mode", "compare");
  if (mode != "compare" && mode != "plan")
    throw InputError(path, 0, "base.mode", "expected compare or plan, got '" + mode + "'");

  const OrderedJson& axes = json.at("axes");
  for (const auto& [key, values] : axes.items()) {
    if (std::find(kAxes.begin(), kAxes.end(), key) == kAxes.end())
      throw InputError(path, 0, "axes." + key,
                       "unknown axis; expected one of " + fmt::format("{}", fmt::join(kAxes, ", ")));
    if (!values.is_array() || values.empty())
      throw InputError(path, 0, "axes." + key, "expected a non-empty list of values, got " + values.dump());
    for (std::size_t i = 0; i < values.size(); ++i) {
      check_value(path, fmt::format("axes.{}[{}]", key, i), values[i], kind_of(key));
      for (std::size_t earlier = 0; earlier < i; ++earlier)
        if (values[earlier] == values[i])
          throw InputError(
              path, 0, fmt::format("axes.{}[{}]", key, i),
              fmt::format("expected each value once, got {} as at [{}] too", values[i].dump(), earlier));
    }
  }
  for (const std::string& axis : kAxes)
    if (axes.contains(axis)) spec.axes.push_back(axis);

  // The cartesian product, the last axis fastest.
  std::vector<std::size_t> at(spec.axes.size(), 0);
  for (int index = 0;; ++index) {
    SweepPoint& point = spec.points.emplace_back();
    point.index = index;
    for (std::size_t a = 0; a < spec.axes.size(); ++a) {
      const OrderedJson& value = axes.at(spec.axes[a])[at[a]];
      point.values[spec.axes[a]] = value;
      point.id += (a == 0 ? "" : " ") + spec.axes[a] + "=" + id_value(value);
    }
    std::size_t a = spec.axes.size();
    while (a > 0 && ++at[a - 1] == axes.at(spec.axes[a - 1]).size()) at[--a] = 0;
    if (a == 0) break;
  }
  spec.text = OrderedJson{{"base", spec.base}, {"axes", axes}}.dump();
  // Every point is checked as its compare would check it, so that a bad preset, degree, file or
  // setting fails before any point runs and leaves nothing behind.
  for (const SweepPoint& point : spec.points) {
    try {
      (void)check_compare_job(spec.job(point));
    } catch (const InputError& e) {
      throw InputError(path, 0, "", "point '" + point.id + "': " + e.what());
    }
  }
  return spec;
}

CompareJob SweepSpec::job(const SweepPoint& point) const {
  OrderedJson settings = base;
  for (const auto& [key, value] : point.values.items()) settings[key] = value;
  CompareJob job;
  job.machine.model = settings.value("model", job.machine.model);
  job.machine.cluster = settings.value("cluster", job.machine.cluster);
  job.machine.nodes = settings.value("nodes", 1);
  job.machine.framework = settings.value("framework", std::string());
  job.machine.attention_implementation = settings.value("attention_implementation", std::string());
  job.policies.degree = settings.value("degree", 0);
  job.policies.policies = settings.value("policies", job.policies.policies);
  job.trace = settings.value("trace", job.trace);
  job.order = settings.value("order", std::string("sorted"));
  job.seed = settings.value("seed", uint64_t{0});
  job.limit = settings.value("limit", int64_t{0});
  job.sample = settings.value("sample", 1.0);
  job.engine = settings.value("engine", job.engine);
  job.grid_ratio = settings.value("grid_ratio", job.grid_ratio);
  job.global_batch = settings.value("global_batch", job.global_batch);
  const auto length_text = [&](const char* key, const std::string& fallback) {
    if (!settings.contains(key)) return fallback;
    const OrderedJson& value = settings.at(key);
    return value.is_string() ? value.get<std::string>() : std::to_string(value.get<int64_t>());
  };
  job.max_len = length_text("max_len", job.max_len);
  job.over = settings.value("over", job.over);
  job.global_batch_tokens = length_text("global_batch_tokens", job.global_batch_tokens);
  job.micro_batch_tokens = length_text("micro_batch_tokens", job.micro_batch_tokens);
  job.group_policies = settings.value("group_policies", job.group_policies);
  job.shard_group = settings.value("shard_group", job.shard_group);
  job.gradient_reduce_dtype = settings.value("gradient_reduce_dtype", job.gradient_reduce_dtype);
  job.tune_budgets = settings.value("tune_statics", job.tune_budgets);
  if (settings.value("mode", "compare") == "plan") {
    job.engine = "analytic";
    job.lengths = settings.value("plan_lengths", std::vector<int64_t>{});
    if (job.lengths.empty())
      for (int64_t s = 1024; s <= 1024 * 1024; s *= 2) job.lengths.push_back(s);
    std::sort(job.lengths.begin(), job.lengths.end());
  }
  // A point at the preset's own figures runs on the preset itself.
  const bool varied = settings.value("nvlink_scale", 1.0) != 1 || settings.value("nic_scale", 1.0) != 1 ||
                      settings.value("oversubscription", 1.0) != 1 || settings.contains("hbm_gib") ||
                      settings.contains("nvlink_domain");
  if (varied) {
    hw::ClusterSpec cluster = varied_cluster(settings, job.machine.load_cluster());
    cluster.name += fmt::format(" ({})", point.id);
    job.cluster = cluster;
  }
  return job;
}

}  // namespace paradyse::evaluation
