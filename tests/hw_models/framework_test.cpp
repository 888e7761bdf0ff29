// hw_models/framework.cpp: framework presets and files, how a cluster names its framework, and bad
// framework input refused naming the file and the field.
#include "hw_models/framework.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <string>

#include "common/errors.hpp"
#include "common/json_input.hpp"
#include "hw_models/cluster.hpp"
#include "tests/temp_dir.hpp"

namespace {

using Catch::Matchers::Contains;
using paradyse::InputError;
using paradyse::hw::framework_preset_names;
using paradyse::hw::load_framework;
using paradyse::testing::TempDir;

// A framework preset's file as it is in the repository (the tests run from its root).
paradyse::json_input::Json framework_preset_file(const std::string& name) {
  return paradyse::json_input::load_file("hw_models/frameworks/" + name + ".json");
}

// The eager-pytorch-h100-host preset, edited, written as a file.
std::string write_edited_h100_host(const TempDir& dir, const std::string& name,
                                   const std::function<void(paradyse::json_input::Json&)>& edit) {
  auto json = framework_preset_file("eager-pytorch-h100-host");
  edit(json);
  return dir.write(name, json.dump(2));
}

std::string framework_load_error(const std::string& path) {
  try {
    load_framework(path);
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("expected an InputError for " + path);
  return "";
}

}  // namespace

TEST_CASE("framework presets: each loads under its file's name and says which host it was measured on",
          "[hw_models]") {
  const std::vector<std::string> names = framework_preset_names();
  REQUIRE(names.size() >= 4);
  for (const std::string& name : names) {
    INFO(name);
    const paradyse::hw::FrameworkSpec framework = load_framework(name);
    CHECK(framework.name == name);
    CHECK(framework.source == "preset " + name);
    // A framework that takes another preset's host takes its figures and names it.
    const auto file = framework_preset_file(name);
    const std::string host_from = file.value("host_from", "");
    const auto host_file = host_from.empty() ? file : framework_preset_file(host_from);
    CHECK(framework.host_from == host_from);
    CHECK_THAT(framework.host_machine, Contains(host_file["host_machine"].get<std::string>()));
    if (!host_from.empty()) CHECK_THAT(framework.host_machine, Contains("preset " + host_from));
    CHECK(framework.host.kernel_dispatch_s == host_file["host"]["kernel_dispatch_seconds"].get<double>());
    CHECK(framework.host.kernel_dispatch_s_by_call.size() ==
          host_file["host"]
              .value("kernel_dispatch_seconds_by_call", paradyse::json_input::Json::object())
              .size());
  }
  // The ideal host costs nothing for any call.
  CHECK_FALSE(load_framework("no-host-cost").host.dispatches_at_a_cost());
}

TEST_CASE("cluster presets: each names a framework preset, whose host it issues calls with", "[hw_models]") {
  for (const std::string& cluster : paradyse::hw::cluster_preset_names()) {
    INFO(cluster);
    const paradyse::hw::ClusterSpec spec = paradyse::hw::load_cluster(cluster);
    const std::vector<std::string> names = framework_preset_names();
    REQUIRE(std::find(names.begin(), names.end(), spec.framework) != names.end());
    const auto by_call = framework_preset_file(spec.framework)["host"].value(
        "kernel_dispatch_seconds_by_call", paradyse::json_input::Json::object());
    for (const auto& [call, seconds] : by_call.items())
      CHECK(spec.host.kernel_dispatch_s_by_call.at(call) == seconds.get<double>());
  }
  // --framework replaces the cluster's.
  paradyse::hw::ClusterSpec a100 = paradyse::hw::load_cluster("dgx-a100");
  REQUIRE(a100.host.kernel_dispatch_s_by_call.empty());
  paradyse::hw::use_framework(a100, load_framework("eager-pytorch-h200-host"));
  CHECK(a100.framework == "eager-pytorch-h200-host");
  CHECK(a100.host.kernel_dispatch_s_by_call.at("linear") ==
        framework_preset_file("eager-pytorch-h200-host")["host"]["kernel_dispatch_seconds_by_call"]["linear"]
            .get<double>());
}

TEST_CASE("framework files: a figure without a source, a missing key or an unknown name is refused",
          "[hw_models]") {
  TempDir dir;
  const std::string unsourced = write_edited_h100_host(
      dir, "unsourced.json", [](auto& json) { json["host"]["source"].erase("synchronous"); });
  CHECK_THAT(framework_load_error(unsourced), Contains(unsourced) && Contains("host.source.synchronous"));
  const std::string empty_source = write_edited_h100_host(
      dir, "empty-source.json", [](auto& json) { json["host"]["source"]["kernel_dispatch_seconds"] = ""; });
  CHECK_THAT(framework_load_error(empty_source), Contains("host.source.kernel_dispatch_seconds") &&
                                                     Contains("expected where this figure came from"));
  const std::string by_call = write_edited_h100_host(dir, "by-call-unsourced.json", [](auto& json) {
    json["host"]["source"].erase("kernel_dispatch_seconds_by_call");
  });
  CHECK_THAT(framework_load_error(by_call), Contains("host.source.kernel_dispatch_seconds_by_call"));
  const std::string no_machine =
      write_edited_h100_host(dir, "no-machine.json", [](auto& json) { json.erase("host_machine"); });
  CHECK_THAT(framework_load_error(no_machine), Contains("host_machine"));
  const std::string negative = write_edited_h100_host(dir, "negative.json", [](auto& json) {
    json["host"]["kernel_dispatch_seconds_by_call"]["add"] = -1e-6;
  });
  CHECK_THAT(framework_load_error(negative), Contains("host.kernel_dispatch_seconds_by_call.add"));
  CHECK_THAT(framework_load_error("eager-pytorch"), Contains("expected a preset (") &&
                                                        Contains("no-host-cost") &&
                                                        Contains("'eager-pytorch', which is neither"));
  // A user's own measurement: the preset's figures in a file of its own load as they are.
  const std::string own = write_edited_h100_host(dir, "own.json", [](auto&) {});
  CHECK(load_framework(own).host.kernel_dispatch_s_by_call ==
        load_framework("eager-pytorch-h100-host").host.kernel_dispatch_s_by_call);
  CHECK(load_framework(own).source == own);
}

TEST_CASE("cluster files: a framework by name or file, or a host block, not both", "[hw_models]") {
  TempDir dir;
  auto a100 = paradyse::json_input::parse(paradyse::hw::cluster_preset_text("dgx-a100"), "test");
  auto named = a100;
  named["framework"] = "eager-pytorch-h100-host";
  const paradyse::hw::ClusterSpec with_name =
      paradyse::hw::load_cluster(dir.write("named.json", named.dump(2)));
  CHECK(with_name.framework == "eager-pytorch-h100-host");
  CHECK(with_name.host.communication_dispatch_s ==
        framework_preset_file("eager-pytorch-h100-host")["host"]["communication_dispatch_seconds"]
            .get<double>());

  auto both = named;
  both["host"] = framework_preset_file("eager-pytorch-nominal")["host"];
  const std::string both_path = dir.write("both.json", both.dump(2));
  REQUIRE_THROWS_AS(paradyse::hw::load_cluster(both_path), InputError);
  try {
    paradyse::hw::load_cluster(both_path);
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Contains(both_path) && Contains("expected either a framework or a host block"));
  }
  auto unknown = a100;
  unknown["framework"] = "pytorch";
  REQUIRE_THROWS_WITH(paradyse::hw::load_cluster(dir.write("unknown.json", unknown.dump(2))),
                      Contains("'pytorch', which is neither"));
}

TEST_CASE(
    "framework files: layer calls without a source, of a kind without a price, or not counted are refused",
    "[hw_models]") {
  TempDir dir;
  const auto write_edited_megatron = [&dir](const std::string& name,
                                            const std::function<void(paradyse::json_input::Json&)>& edit) {
    auto json = framework_preset_file("megatron-lm");
    edit(json["host"]["layer_calls"]);
    return dir.write(name, json.dump(2));
  };
  const std::string unsourced_price = write_edited_megatron(
      "unsourced-price.json", [](auto& calls) { calls["call_seconds"]["source"].erase("host_op"); });
  CHECK_THAT(framework_load_error(unsourced_price),
             Contains(unsourced_price) && Contains("host.layer_calls.call_seconds.source.host_op") &&
                 Contains("missing required field"));
  const std::string unsourced_count = write_edited_megatron(
      "unsourced-count.json", [](auto& calls) { calls["source"].erase("layer_rerun"); });
  CHECK_THAT(framework_load_error(unsourced_count), Contains("host.layer_calls.source.layer_rerun"));
  const std::string unpriced = write_edited_megatron(
      "unpriced.json", [](auto& calls) { calls["attention_rerun"]["backward"]["python_call"] = 4; });
  CHECK_THAT(framework_load_error(unpriced),
             Contains("host.layer_calls.attention_rerun.backward.python_call") &&
                 Contains("expected a kind of call that call_seconds prices (compiled_region, "
                          "compiled_region_backward, host_op, kernel)"));
  const std::string not_counted =
      write_edited_megatron("not-counted.json", [](auto& calls) { calls["forward"]["kernel"] = 2.5; });
  CHECK_THAT(framework_load_error(not_counted),
             Contains("host.layer_calls.forward.kernel") && Contains("expected a positive integer, got 2.5"));
  const std::string no_rerun =
      write_edited_megatron("no-rerun.json", [](auto& calls) { calls.erase("layer_rerun"); });
  CHECK_THAT(framework_load_error(no_rerun), Contains("host.layer_calls.layer_rerun") && Contains("missing"));
}

TEST_CASE("framework files: eager calls need their counts and a source, of a call whose elements are counted",
          "[hw_models]") {
  TempDir dir;
  const auto write_edited_torchtitan = [&dir](const std::string& name,
                                              const std::function<void(paradyse::json_input::Json&)>& edit) {
    auto json = framework_preset_file("torchtitan-rmsnorm");
    edit(json);
    return dir.write(name, json.dump(2));
  };
  // The preset as a file loads as the preset does.
  const paradyse::hw::FrameworkSpec as_file =
      load_framework(write_edited_torchtitan("same.json", [](auto&) {}));
  const paradyse::hw::FrameworkSpec preset = load_framework("torchtitan-rmsnorm");
  REQUIRE(as_file.eager_calls.size() == 6);
  CHECK(as_file.eager_calls.at("norm_backward").kernels == preset.eager_calls.at("norm_backward").kernels);
  CHECK(as_file.eager_calls.at("norm_backward").bytes_per_element == 92.0);

  const std::string unsourced = write_edited_torchtitan(
      "unsourced.json", [](auto& json) { json["eager_calls"]["swiglu"].erase("source"); });
  CHECK_THAT(framework_load_error(unsourced),
             Contains(unsourced) && Contains("eager_calls.swiglu.source") && Contains("missing"));
  const std::string empty_source = write_edited_torchtitan(
      "empty-source.json", [](auto& json) { json["eager_calls"]["swiglu"]["source"] = ""; });
  CHECK_THAT(framework_load_error(empty_source), Contains("eager_calls.swiglu.source"));
  const std::string no_elements = write_edited_torchtitan(
      "no-elements.json", [](auto& json) { json["eager_calls"]["linear"] = json["eager_calls"]["swiglu"]; });
  CHECK_THAT(
      framework_load_error(no_elements),
      Contains("eager_calls.linear") &&
          Contains("expected a call whose elements the tracer counts (norm_forward, norm_backward, gelu, "
                   "gelu_backward, swiglu, swiglu_backward, rotary, rotary_backward)"));
  const std::string no_kernels = write_edited_torchtitan(
      "no-kernels.json", [](auto& json) { json["eager_calls"]["swiglu"]["kernels"] = 0; });
  CHECK_THAT(framework_load_error(no_kernels), Contains("eager_calls.swiglu.kernels"));
  const std::string negative = write_edited_torchtitan(
      "negative.json", [](auto& json) { json["eager_calls"]["norm_forward"]["bytes_per_element"] = -4; });
  CHECK_THAT(framework_load_error(negative), Contains("eager_calls.norm_forward.bytes_per_element"));
  const std::string nothing = write_edited_torchtitan(
      "nothing.json", [](auto& json) { json["eager_calls"]["norm_forward"]["bytes_per_element"] = 0; });
  CHECK_THAT(framework_load_error(nothing),
             Contains("eager_calls.norm_forward.bytes_per_element") && Contains("above 0, got 0"));
}

TEST_CASE("framework files: a host from another preset, which has a host of its own, and not a host as well",
          "[hw_models]") {
  TempDir dir;
  auto json = framework_preset_file("torchtitan-rmsnorm");
  json["host_from"] = "pytorch";
  const std::string unknown = dir.write("unknown.json", json.dump(2));
  CHECK_THAT(framework_load_error(unknown), Contains(unknown) && Contains("host_from") &&
                                                Contains("expected a framework preset (") &&
                                                Contains("got \"pytorch\""));
  json["host_from"] = "torchtitan-fused-rmsnorm";
  const std::string chained = dir.write("chained.json", json.dump(2));
  CHECK_THAT(framework_load_error(chained), Contains("host_from") && Contains("a host block of its own"));
  json["host_from"] = "eager-pytorch-h100-host";
  json["host"] = framework_preset_file("eager-pytorch-h100-host")["host"];
  const std::string both = dir.write("both.json", json.dump(2));
  CHECK_THAT(framework_load_error(both), Contains("either host_from or host"));
  json.erase("host");
  json.erase("host_from");
  const std::string neither = dir.write("neither.json", json.dump(2));
  CHECK_THAT(framework_load_error(neither), Contains("host") && Contains("missing"));
}
