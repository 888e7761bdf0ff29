// The learned cost model against known curves: the forest inside the profiled range, the polynomial
// chosen by AIC beyond it, the saved file's round trip, and the errors of bad files and bad queries.
#include "steps/learned_model.hpp"
#include "tests/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string_view>

#include <unistd.h>
#include <xgboost/c_api.h>
#include <nlohmann/json.hpp>

#include "common/errors.hpp"

using namespace paradyse;
using namespace paradyse::steps;

using paradyse::testing::TempDir;

namespace {

// The curves the synthetic profiles are sampled from: time quadratic in s (attention), memory and
// saved bytes linear (activations) with a fixed part (weights, optimizer state).
double time_s(double s) {
  return 1e-3 + 2e-9 * s + 3e-15 * s * s;
}
double memory_bytes(double s) {
  return 2e10 + 5e4 * s;
}
double saved_bytes(double s) {
  return 67108864.0 + 2048.0 * s;
}

constexpr int64_t kib = 1024;

using Entries = std::vector<std::pair<std::string, std::string>>;  // (strategy, recompute)

// s = 1K, 1K + step, ... up to 64K for each entry.
Profile synthetic_profile(const Entries& entries = {{"megatron_ts", "none"}}, int64_t step = kib) {
  Profile profile{
      .model = "gpt-8l", .cluster = "dgx-a100", .degree = 8, .batch = 1, .source = "analytic", .points = {}};
  for (const auto& [strategy, recompute] : entries)
    for (int64_t s = kib; s <= 64 * kib; s += step) {
      const auto x = static_cast<double>(s);
      profile.points.push_back({strategy, recompute, s, time_s(x), memory_bytes(x), saved_bytes(x)});
    }
  return profile;
}

void require_same(const LearnedPrediction& a, const LearnedPrediction& b) {
  REQUIRE(a.iteration_time_s == b.iteration_time_s);
  REQUIRE(a.peak_memory_bytes == b.peak_memory_bytes);
  REQUIRE(a.saved_bytes_per_layer == b.saved_bytes_per_layer);
  REQUIRE(a.extrapolated == b.extrapolated);
}

// Lengths inside, at the edges of and outside the profiled range.
const std::vector<int64_t> query_lengths = {100, 1000, kib, 1536, 5000, 33333, 64 * kib, 100000, 256 * kib};

// The InputError that loading `path` raises; fails the test if it loads.
InputError load_error(const std::string& path) {
  try {
    LearnedModel::load(path);
  } catch (const InputError& e) {
    CHECK(e.file() == path);
    return e;
  }
  FAIL("LearnedModel::load accepted " << path);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("learned: inside the profiled range the forest follows the data", "[costmodel][learned]") {
  const LearnedModel model = LearnedModel::fit(synthetic_profile());
  for (int64_t s = kib; s <= 64 * kib; s += kib / 2) {  // the profiled lengths and the midpoints
    const auto x = static_cast<double>(s);
    const LearnedPrediction p = model.predict("megatron_ts", "none", s);
    INFO("seq " << s);
    CHECK_FALSE(p.extrapolated);
    // Time and memory vary by 14 % over the range, saved bytes threefold: a forest that did not
    // follow the data would miss these bounds.
    CHECK(p.iteration_time_s == Approx(time_s(x)).epsilon(0.005));
    CHECK(p.peak_memory_bytes == Approx(memory_bytes(x)).epsilon(0.005));
    CHECK(p.saved_bytes_per_layer == Approx(saved_bytes(x)).epsilon(0.04));
  }
}

TEST_CASE("learned: AIC picks the data's degree and the polynomial extrapolates", "[costmodel][learned]") {
  const LearnedModel model = LearnedModel::fit(synthetic_profile());
  CHECK(model.polynomial_degree("megatron_ts", "none", "iteration_time_s") == 2);
  CHECK(model.polynomial_degree("megatron_ts", "none", "peak_memory_bytes") == 1);
  CHECK(model.polynomial_degree("megatron_ts", "none", "saved_bytes_per_layer") == 1);
  CHECK(model.profiled_range("megatron_ts", "none") == std::pair<int64_t, int64_t>{kib, 64 * kib});

  for (int64_t s : {256 * kib, int64_t{100000}, int64_t{512}}) {
    const auto x = static_cast<double>(s);
    const LearnedPrediction p = model.predict("megatron_ts", "none", s);
    INFO("seq " << s);
    CHECK(p.extrapolated);
    CHECK(p.iteration_time_s == Approx(time_s(x)).epsilon(0.01));
    CHECK(p.peak_memory_bytes == Approx(memory_bytes(x)).epsilon(0.01));
    CHECK(p.saved_bytes_per_layer == Approx(saved_bytes(x)).epsilon(0.01));
  }
}

TEST_CASE("learned: cubic data picks degree 3", "[costmodel][learned]") {
  // A term in s³ that reaches a third of the total at 64K: degrees 1 and 2 leave a visible residual.
  auto cubic = [](double s) { return 1.0 + 0.5 * std::pow(s / 65536.0, 3); };
  Profile profile = synthetic_profile();
  for (ProfilePoint& point : profile.points) point.iteration_time_s = cubic(static_cast<double>(point.seq));
  const LearnedModel model = LearnedModel::fit(profile);
  CHECK(model.polynomial_degree("megatron_ts", "none", "iteration_time_s") == 3);
  CHECK(model.predict("megatron_ts", "none", 128 * kib).iteration_time_s ==
        Approx(cubic(128.0 * kib)).epsilon(1e-6));
}

TEST_CASE("learned: with six points a polynomial is at most quadratic", "[costmodel][learned]") {
  // AICc's correction grows without bound as the parameters near the points: a cubic (5 parameters
  // with the noise) needs 7 points, so six points at most get a quadratic.
  const Profile profile = synthetic_profile({{"metp", "full"}}, 12 * kib);  // 1K, 13K, ..., 61K
  REQUIRE(profile.points.size() == 6);
  const LearnedModel model = LearnedModel::fit(profile);
  CHECK(model.polynomial_degree("metp", "full", "iteration_time_s") == 2);
  CHECK(model.predict("metp", "full", 256 * kib).iteration_time_s ==
        Approx(time_s(256.0 * kib)).epsilon(0.01));
}

TEST_CASE("learned: predictions are clamped at zero", "[costmodel][learned]") {
  // Time linear with a negative intercept: positive over the profile, negative extrapolated left.
  Profile profile = synthetic_profile();
  for (ProfilePoint& point : profile.points)
    point.iteration_time_s = 1e-9 * static_cast<double>(point.seq) - 5e-7;
  const LearnedModel model = LearnedModel::fit(profile);
  REQUIRE(model.polynomial_degree("megatron_ts", "none", "iteration_time_s") == 1);
  CHECK(model.predict("megatron_ts", "none", 100).iteration_time_s == 0.0);
  CHECK(model.predict("megatron_ts", "none", 600).iteration_time_s == Approx(1e-7).epsilon(1e-6));
}

TEST_CASE("learned: one entry per (strategy, recompute)", "[costmodel][learned]") {
  Profile profile =
      synthetic_profile({{"megatron_ts", "none"}, {"ulysses_z", "none"}, {"ulysses_z", "full"}});
  // Make the entries distinguishable: ulysses_z/full is twice as slow.
  for (ProfilePoint& point : profile.points)
    if (point.recompute == "full") point.iteration_time_s *= 2;
  const LearnedModel model = LearnedModel::fit(profile);
  CHECK(model.model_name() == "gpt-8l");
  CHECK(model.cluster_name() == "dgx-a100");
  CHECK(model.degree() == 8);
  CHECK(model.batch() == 1);
  CHECK(model.has("ulysses_z", "full"));
  CHECK_FALSE(model.has("ulysses_z", "selective"));
  CHECK_FALSE(model.has("metp", "none"));
  for (int64_t s : {4 * kib, 256 * kib})
    CHECK(model.predict("ulysses_z", "full", s).iteration_time_s ==
          Approx(2 * model.predict("ulysses_z", "none", s).iteration_time_s).epsilon(1e-3));
}

TEST_CASE("learned: fitting is deterministic and ignores the order of the rows", "[costmodel][learned]") {
  const Profile profile = synthetic_profile({{"megatron_ts", "none"}, {"metp", "selective"}});
  Profile shuffled = profile;
  std::reverse(shuffled.points.begin(), shuffled.points.end());
  std::rotate(shuffled.points.begin(), shuffled.points.begin() + 17, shuffled.points.end());
  const LearnedModel first = LearnedModel::fit(profile);
  const LearnedModel second = LearnedModel::fit(profile);
  const LearnedModel third = LearnedModel::fit(shuffled);
  for (const char* strategy : {"megatron_ts", "metp"})
    for (int64_t s : query_lengths) {
      const char* recompute = std::string_view(strategy) == "metp" ? "selective" : "none";
      INFO(strategy << " at " << s);
      require_same(first.predict(strategy, recompute, s), second.predict(strategy, recompute, s));
      require_same(first.predict(strategy, recompute, s), third.predict(strategy, recompute, s));
    }
}

TEST_CASE("learned: save then load predicts the same, bit for bit", "[costmodel][learned]") {
  TempDir dir;
  const std::string path = dir.file("model.json");
  const LearnedModel fitted =
      LearnedModel::fit(synthetic_profile({{"megatron_ts", "none"}, {"metp", "full"}}));
  fitted.save(path);
  REQUIRE_FALSE(std::filesystem::exists(path + ".partial"));
  const LearnedModel loaded = LearnedModel::load(path);
  CHECK(loaded.model_name() == fitted.model_name());
  CHECK(loaded.cluster_name() == fitted.cluster_name());
  CHECK(loaded.degree() == fitted.degree());
  CHECK(loaded.batch() == fitted.batch());
  CHECK(loaded.source() == fitted.source());
  for (const char* strategy : {"megatron_ts", "metp"}) {
    const char* recompute = std::string_view(strategy) == "metp" ? "full" : "none";
    CHECK(loaded.profiled_range(strategy, recompute) == fitted.profiled_range(strategy, recompute));
    for (const char* target : {"iteration_time_s", "peak_memory_bytes", "saved_bytes_per_layer"})
      CHECK(loaded.polynomial_degree(strategy, recompute, target) ==
            fitted.polynomial_degree(strategy, recompute, target));
    for (int64_t s : query_lengths) {
      INFO(strategy << " at " << s);
      require_same(loaded.predict(strategy, recompute, s), fitted.predict(strategy, recompute, s));
    }
  }

  // The file is the documented format, with XGBoost's own model inside.
  std::ifstream in(path);
  const nlohmann::json json = nlohmann::json::parse(in);
  CHECK(json.at("format") == "paradyse-learned-cost-model");
  CHECK(json.at("version") == 1);
  const nlohmann::json& target = json.at("entries").at(0).at("targets").at("iteration_time_s");
  CHECK(target.at("scale") == nlohmann::json::array({1024.0, 65536.0}));
  CHECK(target.at("polynomial").size() == 3);
  CHECK(target.at("forest").at("learner").at("gradient_booster").at("model").at("trees").size() == 50);
}

TEST_CASE("learned: inside the range the model answers what XGBoost answers, at every length",
          "[costmodel][learned]") {
  // The model tabulates each forest as a step function of seq; XGBoost itself, on the saved forest,
  // is the reference.
  TempDir dir;
  const std::string path = dir.file("model.json");
  const LearnedModel model = LearnedModel::fit(synthetic_profile());
  model.save(path);
  std::ifstream in(path);
  const nlohmann::json json = nlohmann::json::parse(in);
  std::vector<float> lengths;
  for (int64_t s = kib; s <= 64 * kib; ++s) lengths.push_back(static_cast<float>(s));

  for (const char* target : {"iteration_time_s", "peak_memory_bytes", "saved_bytes_per_layer"}) {
    const std::string forest = json.at("entries").at(0).at("targets").at(target).at("forest").dump();
    BoosterHandle booster = nullptr;
    REQUIRE(XGBoosterCreate(nullptr, 0, &booster) == 0);
    REQUIRE(XGBoosterLoadModelFromBuffer(booster, forest.data(), forest.size()) == 0);
    DMatrixHandle matrix = nullptr;
    REQUIRE(XGDMatrixCreateFromMat(lengths.data(), lengths.size(), 1, std::nanf(""), &matrix) == 0);
    const bst_ulong* shape = nullptr;
    bst_ulong dimensions = 0;
    const float* log_values = nullptr;
    REQUIRE(XGBoosterPredictFromDMatrix(booster, matrix,
                                        "{\"type\": 0, \"training\": false, \"iteration_begin\": 0, "
                                        "\"iteration_end\": 0, \"strict_shape\": false}",
                                        &shape, &dimensions, &log_values) == 0);
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      const LearnedPrediction p = model.predict("megatron_ts", "none", static_cast<int64_t>(lengths[i]));
      const double ours = std::string_view(target) == "iteration_time_s"    ? p.iteration_time_s
                          : std::string_view(target) == "peak_memory_bytes" ? p.peak_memory_bytes
                                                                            : p.saved_bytes_per_layer;
      mismatches += ours != std::exp(static_cast<double>(log_values[i]));
    }
    XGDMatrixFree(matrix);
    XGBoosterFree(booster);
    INFO(target);
    CHECK(mismatches == 0);
  }
}

TEST_CASE("learned: bad model files are InputErrors naming the file", "[costmodel][learned]") {
  TempDir dir;
  const std::string good_path = dir.file("good.json");
  LearnedModel::fit(synthetic_profile({{"megatron_ts", "none"}}, 4 * kib)).save(good_path);
  std::ifstream in(good_path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json good = nlohmann::json::parse(text);
  const std::string path = dir.file("bad.json");
  auto write = [&](const std::string& content) { std::ofstream(path, std::ios::binary) << content; };
  auto edited = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json json = good;
    edit(json);
    return json.dump();
  };

  SECTION("missing file") {
    load_error(dir.file("absent.json"));
  }
  SECTION("corrupt") {
    write("{\"format\": paradyse}");
    load_error(path);
  }
  SECTION("truncated") {
    write(text.substr(0, text.size() / 2));
    load_error(path);
  }
  SECTION("another format") {
    write(edited([](nlohmann::json& j) { j["format"] = "paradyse-cluster"; }));
    CHECK(load_error(path).field() == "format");
  }
  SECTION("another version") {
    write(edited([](nlohmann::json& j) { j["version"] = 2; }));
    CHECK(load_error(path).field() == "version");
  }
  SECTION("a profile CSV") {
    write("model,cluster,degree\n");
    load_error(path);
  }
  SECTION("missing top-level key") {
    write(edited([](nlohmann::json& j) { j.erase("batch"); }));
    CHECK(load_error(path).field() == "batch");
  }
  SECTION("missing entry key") {
    write(edited([](nlohmann::json& j) { j["entries"][0].erase("max_seq"); }));
    CHECK(load_error(path).field() == "entries[0].max_seq");
  }
  SECTION("missing target") {
    write(edited([](nlohmann::json& j) { j["entries"][0]["targets"].erase("peak_memory_bytes"); }));
    CHECK(load_error(path).field() == "entries[0].targets.peak_memory_bytes");
  }
  SECTION("mistyped polynomial") {
    write(edited(
        [](nlohmann::json& j) { j["entries"][0]["targets"]["iteration_time_s"]["polynomial"] = "x^2"; }));
    CHECK(load_error(path).field() == "entries[0].targets.iteration_time_s.polynomial");
  }
  SECTION("scale other than the range") {
    write(edited(
        [](nlohmann::json& j) { j["entries"][0]["targets"]["saved_bytes_per_layer"]["scale"][1] = 1e6; }));
    CHECK(load_error(path).field() == "entries[0].targets.saved_bytes_per_layer.scale");
  }
  SECTION("unknown recompute") {
    write(edited([](nlohmann::json& j) { j["entries"][0]["recompute"] = "some"; }));
    CHECK(load_error(path).field() == "entries[0].recompute");
  }
  SECTION("corrupt forest") {
    write(edited([](nlohmann::json& j) {
      j["entries"][0]["targets"]["iteration_time_s"]["forest"] = {{"learner", 1}};
    }));
    CHECK(load_error(path).field() == "entries[0].targets.iteration_time_s.forest");
  }
  // XGBoost would load these and then read out of bounds or through an empty tree when predicting.
  const std::string forest_field = "entries[0].targets.iteration_time_s.forest";
  const auto edited_tree = [&](const std::function<void(nlohmann::json&)>& edit) {
    return edited([&](nlohmann::json& j) {
      edit(j["entries"][0]["targets"]["iteration_time_s"]["forest"]["learner"]["gradient_booster"]["model"]);
    });
  };
  SECTION("two trees of one id") {
    write(edited_tree([](nlohmann::json& model) { model["trees"][0]["id"] = 1; }));
    CHECK_THAT(std::string(load_error(path).what()), Catch::Contains("a tree's id is 1"));
  }
  SECTION("a node array shorter than the tree") {
    write(edited_tree([](nlohmann::json& model) { model["trees"][0]["split_indices"].erase(0); }));
    CHECK_THAT(std::string(load_error(path).what()), Catch::Contains("split_indices holds"));
  }
  SECTION("a split on a second feature") {
    write(edited_tree([](nlohmann::json& model) { model["trees"][0]["split_indices"][0] = 1; }));
    CHECK(load_error(path).field() == forest_field);
  }
  SECTION("fewer trees than the count") {
    write(edited_tree([](nlohmann::json& model) { model["trees"].erase(0); }));
    CHECK_THAT(std::string(load_error(path).what()), Catch::Contains("num_trees is"));
  }
  SECTION("leaf vectors") {
    write(edited_tree([](nlohmann::json& model) { model["gbtree_model_param"]["size_leaf_vector"] = "4"; }));
    CHECK_THAT(std::string(load_error(path).what()), Catch::Contains("size_leaf_vector is 4: expected 0"));
    write(edited_tree(
        [](nlohmann::json& model) { model["trees"][1]["tree_param"]["size_leaf_vector"] = "2"; }));
    CHECK_THAT(std::string(load_error(path).what()), Catch::Contains("size_leaf_vector is 2: expected 0"));
  }
  SECTION("unknown key") {
    write(edited([](nlohmann::json& j) { j["comment"] = "hand-edited"; }));
    CHECK(load_error(path).field() == "comment");
  }
}

TEST_CASE("learned: queries and profiles it cannot answer are InputErrors", "[costmodel][learned]") {
  SECTION("unknown strategy") {
    const LearnedModel model = LearnedModel::fit(synthetic_profile({{"megatron_ts", "none"}}, 8 * kib));
    REQUIRE_THROWS_AS(model.predict("ring_z", "none", 4096), InputError);
    REQUIRE_THROWS_AS(model.predict("megatron_ts", "full", 4096), InputError);
    REQUIRE_THROWS_AS(model.profiled_range("ring_z", "none"), InputError);
    REQUIRE_THROWS_AS(model.polynomial_degree("megatron_ts", "none", "energy_j"), InputError);
  }
  SECTION("fewer than five lengths for a strategy") {
    Profile profile = synthetic_profile({{"megatron_ts", "none"}, {"ulysses_z", "selective"}}, 8 * kib);
    std::erase_if(profile.points,
                  [](const ProfilePoint& p) { return p.strategy == "ulysses_z" && p.seq > 24 * kib; });
    try {
      LearnedModel::fit(profile);
      FAIL("fitted three lengths");
    } catch (const InputError& e) {
      CHECK_THAT(e.what(), Catch::Contains("ulysses_z"));
    }
  }
  SECTION("a non-positive value") {
    Profile profile = synthetic_profile();
    profile.points[3].peak_memory_bytes = 0;
    REQUIRE_THROWS_AS(LearnedModel::fit(profile), InputError);
  }
  SECTION("a length twice") {
    Profile profile = synthetic_profile();
    profile.points.push_back(profile.points[0]);
    REQUIRE_THROWS_AS(LearnedModel::fit(profile), InputError);
  }
}
