// The learned cost model: XGBoost random forests inside the profiled range, least-squares polynomials
// (Eigen) chosen by AIC beyond it. Both libraries stay in this file (their headers are heavy to compile
// and no other folder should depend on them); learned_model.hpp speaks project types only.
#include "steps/learned_model.hpp"

#include "common/atomic_file.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <xgboost/c_api.h>
#include <Eigen/Dense>
#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "common/json_input.hpp"
#include "strategies/strategy.hpp"

namespace paradyse::steps {
namespace {

constexpr const char* format_name = "paradyse-learned-cost-model";
constexpr int64_t format_version = 1;
constexpr std::size_t min_points = kMinProfiledLengths;

// The three fitted quantities, in the order of every per-target array.
enum Target : std::size_t { iteration_time, peak_memory, saved_bytes, num_targets };
constexpr std::array<std::string_view, num_targets> target_names = {"iteration_time_s", "peak_memory_bytes",
                                                                    "saved_bytes_per_layer"};

constexpr std::array<double ProfilePoint::*, num_targets> measured = {
    &ProfilePoint::iteration_time_s, &ProfilePoint::peak_memory_bytes, &ProfilePoint::saved_bytes_per_layer};
constexpr std::array<double LearnedPrediction::*, num_targets> predicted = {
    &LearnedPrediction::iteration_time_s, &LearnedPrediction::peak_memory_bytes,
    &LearnedPrediction::saved_bytes_per_layer};

// ---- XGBoost -------------------------------------------------------------------------------------

// XGBoost's last error without its "[hh:mm:ss] " stamp and the stack trace after the first line.
std::string xgboost_error() {
  std::string text = XGBGetLastError();
  text = text.substr(0, text.find('\n'));
  if (const auto stamp_end = text.find("] "); text.starts_with('[') && stamp_end != std::string::npos)
    text.erase(0, stamp_end + 2);
  return text;
}

// XGBoost otherwise prints warnings to stderr from inside library calls, mixed with our output.
void quiet_xgboost() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (XGBSetGlobalConfig("{\"verbosity\": 0}") != 0)
      throw InternalError("XGBSetGlobalConfig: " + xgboost_error());
  });
}

void check_xgboost(int status, const char* call) {
  if (status != 0) throw InternalError(std::string(call) + ": " + xgboost_error());
}

using DMatrix = std::unique_ptr<void, decltype(&XGDMatrixFree)>;
using Booster = std::unique_ptr<void, decltype(&XGBoosterFree)>;

DMatrix make_dmatrix(const std::vector<float>& seq) {
  DMatrixHandle handle = nullptr;
  // One thread, as for the booster: a few hundred rows do not pay for waking a thread pool.
  check_xgboost(XGDMatrixCreateFromMat_omp(seq.data(), seq.size(), 1, std::numeric_limits<float>::quiet_NaN(),
                                           &handle, 1),
                "XGDMatrixCreateFromMat_omp");
  return DMatrix(handle, &XGDMatrixFree);
}

Booster make_booster(const DMatrix* train) {
  BoosterHandle handle = nullptr;
  DMatrixHandle matrices[] = {train ? train->get() : nullptr};
  check_xgboost(XGBoosterCreate(matrices, train ? 1 : 0, &handle), "XGBoosterCreate");
  return Booster(handle, &XGBoosterFree);
}

// The forest's answers at `seq`, in one call; nothing when it does not answer with one value per row
// (a model of several outputs or classes, as a hand-edited file may hold).
std::optional<std::vector<float>> predict_all(const Booster& booster, const std::vector<float>& seq) {
  DMatrix matrix = make_dmatrix(seq);
  const bst_ulong* shape = nullptr;
  bst_ulong dimensions = 0;
  const float* result = nullptr;
  check_xgboost(XGBoosterPredictFromDMatrix(booster.get(), matrix.get(),
                                            "{\"type\": 0, \"training\": false, \"iteration_begin\": 0, "
                                            "\"iteration_end\": 0, \"strict_shape\": false}",
                                            &shape, &dimensions, &result),
                "XGBoosterPredictFromDMatrix");
  if (dimensions != 1 || shape[0] != seq.size()) return std::nullopt;
  return std::vector<float>(result, result + seq.size());
}

// XGBoost trusts the structure of a model it loads: two trees of one id leave a slot empty, a node
// array shorter than its tree's node count or a split on a feature it does not have is read out of
// bounds, and a child at or before its parent is a cycle that prediction walks forever. A loaded file
// is therefore checked here first, against what XGBoost writes for a single-output forest of numeric
// splits over one feature. `fail` throws.
template <typename Fail>
void check_forest_structure(const nlohmann::json& model, const Fail& fail) {
  // XGBoost writes its counts as strings of decimal digits.
  const auto count = [&](const nlohmann::json& object, const char* key) {
    const std::string& text = object.at(key).get_ref<const std::string&>();
    if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
      fail(std::string(key) + " is \"" + text + "\": expected a count");
    return std::stoll(text);
  };
  const auto expect_count = [&](const nlohmann::json& object, const char* key, int64_t expected) {
    if (const int64_t got = count(object, key); got != expected)
      fail(std::string(key) + " is " + std::to_string(got) + ": expected " + std::to_string(expected));
  };
  const nlohmann::json& learner = model.at("learner");
  const nlohmann::json& parameters = learner.at("learner_model_param");
  expect_count(parameters, "num_feature", 1);
  expect_count(parameters, "num_class", 0);
  if (parameters.contains("num_target")) expect_count(parameters, "num_target", 1);
  const nlohmann::json& booster = learner.at("gradient_booster");
  if (booster.at("name") != "gbtree")
    fail("gradient_booster is " + booster.at("name").dump() + ": expected \"gbtree\"");
  const nlohmann::json& gbtree = booster.at("model");
  const nlohmann::json& trees = gbtree.at("trees");
  if (!trees.is_array() || trees.empty()) fail("expected an array of trees");
  const auto num_trees = static_cast<int64_t>(trees.size());
  const nlohmann::json& gbtree_param = gbtree.at("gbtree_model_param");
  expect_count(gbtree_param, "num_trees", num_trees);
  // A leaf holds one value: XGBoost's CPU predictor stops the process on leaf vectors.
  if (gbtree_param.contains("size_leaf_vector")) expect_count(gbtree_param, "size_leaf_vector", 0);
  const nlohmann::json& tree_info = gbtree.at("tree_info");
  if (!tree_info.is_array() || static_cast<int64_t>(tree_info.size()) != num_trees ||
      std::any_of(tree_info.begin(), tree_info.end(), [](const nlohmann::json& group) { return group != 0; }))
    fail("tree_info is " + tree_info.dump() + ": expected a 0 (the one output) per tree");
  std::vector<bool> id_seen(trees.size());
  for (const nlohmann::json& tree : trees) {
    const nlohmann::json& id = tree.at("id");
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= num_trees ||
        id_seen[id.get<std::size_t>()])
      fail("a tree's id is " + id.dump() + ": expected each of 0 to " + std::to_string(num_trees - 1) +
           " once");
    id_seen[id.get<std::size_t>()] = true;

    const nlohmann::json& tree_param = tree.at("tree_param");
    expect_count(tree_param, "num_feature", 1);
    if (tree_param.contains("size_leaf_vector")) expect_count(tree_param, "size_leaf_vector", 0);
    const int64_t size = count(tree_param, "num_nodes");
    if (size < 1) fail("a tree has no nodes");
    for (const char* key :
         {"base_weights", "default_left", "left_children", "loss_changes", "parents", "right_children",
          "split_conditions", "split_indices", "split_type", "sum_hessian"}) {
      const nlohmann::json& values = tree.at(key);
      if (!values.is_array() || static_cast<int64_t>(values.size()) != size)
        fail(std::string("a tree's ") + key + " holds " + std::to_string(values.size()) +
             " values: expected " + std::to_string(size) + ", its num_nodes");
    }
    for (const char* key : {"categories", "categories_nodes", "categories_segments", "categories_sizes"})
      if (tree.contains(key) && !tree[key].empty())
        fail(std::string("a tree has ") + key + ": expected numeric splits");
    const nlohmann::json &left_children = tree["left_children"], &right_children = tree["right_children"];
    for (int64_t node = 0; node < size; ++node) {
      const auto at = static_cast<std::size_t>(node);
      if (tree["split_indices"][at] != 0 || tree["split_type"][at] != 0)
        fail("node " + std::to_string(node) + " of a tree splits on feature " +
             tree["split_indices"][at].dump() + " of type " + tree["split_type"][at].dump() +
             ": expected a numeric split on feature 0");
      // XGBoost numbers a node's children after it.
      if (!left_children[at].is_number_integer() || !right_children[at].is_number_integer())
        fail("node " + std::to_string(node) + " of a tree has children " + left_children[at].dump() +
             " and " + right_children[at].dump() + ": expected node numbers");
      const int64_t left = left_children[at].get<int64_t>(), right = right_children[at].get<int64_t>();
      if ((left == -1) != (right == -1) ||
          (left != -1 && (left <= node || right <= node || left >= size || right >= size)))
        fail("node " + std::to_string(node) + " of a tree has children " + std::to_string(left) + " and " +
             std::to_string(right) + ": expected both -1, or both after it in the tree");
      if (!tree["split_conditions"][at].is_number())
        fail("node " + std::to_string(node) + " of a tree has split condition " +
             tree["split_conditions"][at].dump() + ": expected a number");
    }
  }
}

// One random forest over the feature seq. It learns ln(value): XGBoost works in float32, whose 24-bit
// mantissa cannot hold a byte count near 1e11 to the byte, but holds its log to ~1e-7 relative, and
// a relative error is what a cost model cares about.
//
// Over one feature a forest is a step function: each tree sends seq left when seq < its threshold, so
// between two consecutive thresholds of all trees together every tree, and the forest, is constant.
// The forest is therefore asked once per step when it is built, and a query is a binary search that
// returns, bit for bit, what XGBoost would (one call through its C API costs ~30 µs; the selector asks
// for every length and candidate). No booster outlives the construction.
class Forest {
 public:
  static Forest train(const std::vector<double>& seq, const std::vector<double>& values) {
    quiet_xgboost();
    std::vector<float> features(seq.begin(), seq.end());
    std::vector<float> labels;
    double mean_label = 0;
    for (double value : values) {
      labels.push_back(static_cast<float>(std::log(value)));
      mean_label += std::log(value) / static_cast<double>(values.size());
    }
    DMatrix train = make_dmatrix(features);
    check_xgboost(XGDMatrixSetFloatInfo(train.get(), "label", labels.data(), labels.size()),
                  "XGDMatrixSetFloatInfo");
    Booster booster = make_booster(&train);
    // The paper's forest: 50 trees of depth ≤ 10, each on 80 % of the rows, averaged (learning rate
    // 1 over one round of parallel trees is XGBoost's random-forest mode). reg_lambda 0 makes a leaf
    // the plain mean of its rows as in a textbook forest; XGBoost's default of 1 would pull a one-row
    // leaf halfway back to base_score. base_score at the mean keeps the float32 residuals small.
    // Exact split finding, because with a few dozen rows there is nothing to bin.
    const std::string base_score = std::to_string(mean_label);
    const std::array<std::pair<const char*, const char*>, 14> params = {{
        {"booster", "gbtree"},
        {"objective", "reg:squarederror"},
        {"tree_method", "exact"},
        {"num_parallel_tree", "50"},
        {"max_depth", "10"},
        {"learning_rate", "1"},
        {"subsample", "0.8"},
        {"colsample_bynode", "1"},
        {"reg_lambda", "0"},
        {"min_child_weight", "1"},
        {"base_score", base_score.c_str()},
        {"seed", "42"},
        {"nthread", "1"},
        {"verbosity", "0"},
    }};
    for (const auto& [name, value] : params)
      check_xgboost(XGBoosterSetParam(booster.get(), name, value), "XGBoosterSetParam");
    check_xgboost(XGBoosterUpdateOneIter(booster.get(), 0, train.get()), "XGBoosterUpdateOneIter");

    bst_ulong length = 0;
    const char* buffer = nullptr;
    check_xgboost(XGBoosterSaveModelToBuffer(booster.get(), "{\"format\": \"json\"}", &length, &buffer),
                  "XGBoosterSaveModelToBuffer");
    // Built from the saved model, not the trained booster, so a model predicts the same before
    // saving and after loading.
    return from_json(nlohmann::json::parse(buffer, buffer + length), "", "");
  }

  // `file` and `field` name the forest in the file being loaded; empty when it comes from training,
  // where a failure is ours, not the user's.
  static Forest from_json(const nlohmann::json& model, const std::string& file, const std::string& field) {
    quiet_xgboost();
    auto fail = [&](const std::string& problem) {
      if (field.empty()) throw InternalError("a trained forest: " + problem);
      throw InputError(file, 0, field, "expected an XGBoost JSON model of a forest over seq: " + problem);
    };
    try {
      check_forest_structure(model, fail);
    } catch (const nlohmann::json::exception& e) {
      fail(e.what());
    }
    Forest forest;
    forest.json_ = model.dump();
    Booster booster = make_booster(nullptr);
    if (XGBoosterLoadModelFromBuffer(booster.get(), forest.json_.data(), forest.json_.size()) != 0)
      fail(xgboost_error());
    // Training parameters are not part of a saved model.
    if (XGBoosterSetParam(booster.get(), "nthread", "1") != 0) fail(xgboost_error());
    bst_ulong num_features = 0;
    if (XGBoosterGetNumFeature(booster.get(), &num_features) != 0) fail(xgboost_error());
    if (num_features != 1) fail("got " + std::to_string(num_features) + " features");

    for (const nlohmann::json& tree : model["learner"]["gradient_booster"]["model"]["trees"]) {
      const nlohmann::json& left_children = tree["left_children"];
      const nlohmann::json& split_conditions = tree["split_conditions"];
      for (std::size_t node = 0; node < left_children.size(); ++node)
        if (left_children[node].get<int64_t>() != -1)  // a leaf's split_condition is its value
          forest.thresholds_.push_back(split_conditions[node].get<float>());
    }
    std::sort(forest.thresholds_.begin(), forest.thresholds_.end());
    forest.thresholds_.erase(std::unique(forest.thresholds_.begin(), forest.thresholds_.end()),
                             forest.thresholds_.end());

    // Step k holds the seq with k thresholds at or below it: a threshold itself, or anything below the
    // first. Asking again inside each step checks that the forest is the step function assumed
    // (numeric splits on its one feature), which a hand-edited model need not be.
    const std::vector<float>& t = forest.thresholds_;
    const float below = t.empty() ? 0.0f : t.front() - std::abs(t.front()) - 1.0f;
    std::vector<float> at_steps = {below};
    at_steps.insert(at_steps.end(), t.begin(), t.end());
    std::vector<float> inside_steps = {below - 1.0f};
    std::vector<std::size_t> inside_step_index = {0};
    for (std::size_t k = 1; k <= t.size(); ++k) {
      const float inside =
          k < t.size() ? t[k - 1] + (t[k] - t[k - 1]) / 2 : t[k - 1] + std::abs(t[k - 1]) + 1.0f;
      if (inside > t[k - 1] && (k == t.size() || inside < t[k])) {
        inside_steps.push_back(inside);
        inside_step_index.push_back(k);
      }
    }
    const std::optional<std::vector<float>> at_values = predict_all(booster, at_steps);
    const std::optional<std::vector<float>> check_values = predict_all(booster, inside_steps);
    if (!at_values || !check_values) fail("it does not answer one value per seq");
    forest.log_values_ = *at_values;
    const std::vector<float>& check = *check_values;
    for (std::size_t i = 0; i < check.size(); ++i)
      if (check[i] != forest.log_values_[inside_step_index[i]])
        fail("its answer changes at " + std::to_string(inside_steps[i]) + ", between two split thresholds");
    return forest;
  }

  // ln of the target at seq; the comparison is XGBoost's, on seq as a float32 feature.
  double predict_log(int64_t seq) const {
    const auto feature = static_cast<float>(seq);
    const auto step = std::upper_bound(thresholds_.begin(), thresholds_.end(), feature) - thresholds_.begin();
    return static_cast<double>(log_values_[static_cast<std::size_t>(step)]);
  }

  const std::string& json() const { return json_; }

 private:
  Forest() = default;

  std::string json_;               // XGBoost's JSON model, written into the saved file as it is
  std::vector<float> thresholds_;  // every split threshold of every tree, sorted, distinct
  std::vector<float> log_values_;  // per step: below thresholds_[0], then from each threshold on
};

// ---- polynomials ---------------------------------------------------------------------------------

// c0 + c1·x + c2·x² + ... with x = (seq − lo) / (hi − lo): on [0, 1] the Vandermonde columns stay
// comparable, where raw seq³ near 1e15 would make the least-squares problem ill-conditioned.
struct Polynomial {
  std::vector<double> coefficients;
  double lo = 0;
  double hi = 1;

  int degree() const { return static_cast<int>(coefficients.size()) - 1; }
  double at(double seq) const {
    const double x = (seq - lo) / (hi - lo);
    double value = 0;
    for (auto c = coefficients.rbegin(); c != coefficients.rend(); ++c) value = value * x + *c;
    return value;
  }
};

// The degree (1–3) with the lowest AIC = n·ln(RSS/n) + 2p, p = degree + 2 parameters (the
// coefficients and the noise), with the small-sample correction 2p(p+1)/(n−p−1) (AICc; Burnham and
// Anderson advise it whenever n/p < 40, and profiles have a handful of lengths: without it a cubic
// through six points wins on a sliver of residual and extrapolates below zero). A degree needs
// n > p + 1; ties go to the lower degree.
Polynomial fit_polynomial(const std::vector<double>& seq, const std::vector<double>& values, double lo,
                          double hi) {
  const auto n = static_cast<Eigen::Index>(seq.size());
  Eigen::VectorXd x(n), y(n);
  double largest = 0;
  for (Eigen::Index i = 0; i < n; ++i) {
    x(i) = (seq[static_cast<std::size_t>(i)] - lo) / (hi - lo);
    y(i) = values[static_cast<std::size_t>(i)];
    largest = std::max(largest, std::abs(y(i)));
  }
  // Residuals below 1e-9 of the values are rounding, not a better fit: flooring RSS there keeps ln
  // finite for exact data and lets the penalty pick the fewest coefficients among exact fits (the
  // analytic model's memory is exactly linear in seq, and double rounding would otherwise decide).
  const double rss_floor = static_cast<double>(n) * std::pow(1e-9 * largest, 2);

  Polynomial best;
  double best_aic = std::numeric_limits<double>::infinity();
  for (int degree = 1; degree <= 3 && n > degree + 3; ++degree) {
    Eigen::MatrixXd vandermonde(n, degree + 1);
    for (Eigen::Index i = 0; i < n; ++i) {
      double power = 1;
      for (int j = 0; j <= degree; ++j, power *= x(i)) vandermonde(i, j) = power;
    }
    const Eigen::VectorXd c = vandermonde.colPivHouseholderQr().solve(y);
    const double rss = std::max((vandermonde * c - y).squaredNorm(), rss_floor);
    const double p = degree + 2;
    const double aic = static_cast<double>(n) * std::log(rss / static_cast<double>(n)) + 2 * p +
                       2 * p * (p + 1) / (static_cast<double>(n) - p - 1);
    if (aic < best_aic) {
      best_aic = aic;
      best.coefficients.assign(c.data(), c.data() + c.size());
    }
  }
  PARADYSE_CHECK(!best.coefficients.empty(), "at least min_points points, so degree 1 is a candidate");
  best.lo = lo;
  best.hi = hi;
  return best;
}

struct TargetModel {
  Polynomial polynomial;
  Forest forest;
};

struct Entry {
  std::string strategy;
  std::string recompute;
  int64_t min_seq = 0;
  int64_t max_seq = 0;
  std::vector<TargetModel> targets;  // indexed by Target
};

Target parse_target(std::string_view name) {
  for (std::size_t t = 0; t < num_targets; ++t)
    if (target_names[t] == name) return static_cast<Target>(t);
  throw InputError("", 0, "target",
                   "expected iteration_time_s, peak_memory_bytes or saved_bytes_per_layer, got '" +
                       std::string(name) + "'");
}

// ---- loading -------------------------------------------------------------------------------------

using json_input::Json;
using json_input::Object;

// A list of min_size to max_size finite numbers.
std::vector<double> numbers(const Object& object, std::string_view key, std::size_t min_size,
                            std::size_t max_size) {
  const Json& value = object.json().at(std::string(key));
  const std::string expected = "expected a list of " + std::to_string(min_size) + " to " +
                               std::to_string(max_size) + " finite numbers, got ";
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  if (!value.is_array() || value.size() < min_size || value.size() > max_size)
    object.fail(key, expected + text);
  std::vector<double> result;
  for (const Json& element : value) {
    if (!element.is_number() || !std::isfinite(element.get<double>())) object.fail(key, expected + text);
    result.push_back(element.get<double>());
  }
  return result;
}

TargetModel load_target(const Object& target, const Entry& entry) {
  target.require_keys({"polynomial", "scale", "forest"});
  Polynomial polynomial;
  polynomial.coefficients = numbers(target, "polynomial", 2, 4);
  const std::vector<double> scale = numbers(target, "scale", 2, 2);
  if (scale[0] != static_cast<double>(entry.min_seq) || scale[1] != static_cast<double>(entry.max_seq))
    target.fail("scale", "expected [min_seq, max_seq] = [" + std::to_string(entry.min_seq) + ", " +
                             std::to_string(entry.max_seq) + "], got [" + std::to_string(scale[0]) + ", " +
                             std::to_string(scale[1]) + "]");
  polynomial.lo = scale[0];
  polynomial.hi = scale[1];
  const Object forest = target.object("forest");
  return {std::move(polynomial), Forest::from_json(forest.json(), target.source(), target.field("forest"))};
}

Entry load_entry(const Object& object) {
  object.require_keys({"strategy", "recompute", "min_seq", "max_seq", "targets"});
  Entry entry;
  entry.strategy = object.string("strategy");
  if (entry.strategy.empty()) object.fail("strategy", "expected a strategy name, got ''");
  entry.recompute = object.string("recompute");
  if (!parse_recompute(entry.recompute))
    object.fail("recompute", "expected none, selective or full, got '" + entry.recompute + "'");
  entry.min_seq = object.positive_integer("min_seq");
  entry.max_seq = object.positive_integer("max_seq");
  if (entry.max_seq <= entry.min_seq)
    object.fail("max_seq", "expected more than min_seq (" + std::to_string(entry.min_seq) + "), got " +
                               std::to_string(entry.max_seq));
  const Object targets = object.object("targets");
  targets.require_keys({target_names[iteration_time], target_names[peak_memory], target_names[saved_bytes]});
  for (std::size_t t = 0; t < num_targets; ++t)
    entry.targets.push_back(load_target(targets.object(target_names[t]), entry));
  return entry;
}

}  // namespace

struct LearnedModel::Impl {
  std::string model;
  std::string cluster;
  int degree = 0;
  int64_t batch = 1;
  std::string source;
  std::vector<Entry> entries;

  const Entry* find(std::string_view strategy, std::string_view recompute) const {
    for (const Entry& entry : entries)
      if (entry.strategy == strategy && entry.recompute == recompute) return &entry;
    return nullptr;
  }

  const Entry& at(std::string_view strategy, std::string_view recompute) const {
    if (const Entry* entry = find(strategy, recompute)) return *entry;
    std::string known;
    for (const Entry& entry : entries)
      known += (known.empty() ? "" : ", ") + entry.strategy + "/" + entry.recompute;
    throw InputError("", 0, "strategy",
                     "expected a (strategy, recompute) of the learned model of " + model + " on " + cluster +
                         " (" + known + "), got " + std::string(strategy) + "/" + std::string(recompute));
  }
};

LearnedModel::LearnedModel(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

LearnedModel LearnedModel::fit(const Profile& profile) {
  // What load() would reject must not be fitted and saved.
  if (profile.degree <= 0)
    throw InputError("", 0, "degree",
                     "expected a positive parallel degree, got " + std::to_string(profile.degree));
  if (profile.batch <= 0)
    throw InputError("", 0, "batch", "expected a positive batch, got " + std::to_string(profile.batch));
  if (!is_profile_source(profile.source))
    throw InputError("", 0, "source", "expected sim, analytic or real, got '" + profile.source + "'");
  auto impl = std::make_shared<Impl>();
  impl->model = profile.model;
  impl->cluster = profile.cluster;
  impl->degree = profile.degree;
  impl->batch = profile.batch;
  impl->source = profile.source;

  // Ordered, so that entries (and the saved file) do not depend on the order of the profile's rows.
  std::map<std::pair<std::string, std::string>, std::map<int64_t, const ProfilePoint*>> groups;
  for (const ProfilePoint& point : profile.points) {
    const std::string name = point.strategy + " (recompute " + point.recompute + ")";
    if (!parse_recompute(point.recompute))
      throw InputError(
          "", 0, "recompute",
          "expected none, selective or full for " + point.strategy + ", got '" + point.recompute + "'");
    for (std::size_t t = 0; t < num_targets; ++t)
      if (const double value = point.*measured[t]; !(value > 0) || !std::isfinite(value))
        throw InputError("", 0, std::string(target_names[t]),
                         "expected positive finite values for " + name + ", got " + std::to_string(value) +
                             " at seq " + std::to_string(point.seq));
    if (point.seq <= 0)
      throw InputError("", 0, "seq",
                       "expected positive lengths for " + name + ", got " + std::to_string(point.seq));
    if (!groups[{point.strategy, point.recompute}].emplace(point.seq, &point).second)
      throw InputError(
          "", 0, "seq",
          "expected each length once for " + name + ", got " + std::to_string(point.seq) + " twice");
  }

  for (const auto& [key, by_seq] : groups) {
    const auto& [strategy, recompute] = key;
    if (by_seq.size() < min_points)
      throw InputError("", 0, "strategy",
                       "expected at least " + std::to_string(min_points) + " profiled lengths for " +
                           strategy + " (recompute " + recompute + ") to fit a cost model, got " +
                           std::to_string(by_seq.size()));
    Entry entry;
    entry.strategy = strategy;
    entry.recompute = recompute;
    entry.min_seq = by_seq.begin()->first;
    entry.max_seq = by_seq.rbegin()->first;
    std::vector<double> seq;
    for (const auto& [length, point] : by_seq) seq.push_back(static_cast<double>(length));
    for (std::size_t t = 0; t < num_targets; ++t) {
      std::vector<double> values;
      for (const auto& [length, point] : by_seq) values.push_back(point->*measured[t]);
      entry.targets.push_back({fit_polynomial(seq, values, static_cast<double>(entry.min_seq),
                                              static_cast<double>(entry.max_seq)),
                               Forest::train(seq, values)});
    }
    impl->entries.push_back(std::move(entry));
  }
  return LearnedModel(std::move(impl));
}

void LearnedModel::save(const std::string& path) const {
  using Ordered = nlohmann::ordered_json;
  Ordered root = {{"format", format_name},     {"version", format_version},  {"model", impl_->model},
                  {"cluster", impl_->cluster}, {"degree", impl_->degree},    {"batch", impl_->batch},
                  {"source", impl_->source},   {"entries", Ordered::array()}};
  for (const Entry& entry : impl_->entries) {
    Ordered targets = Ordered::object();
    for (std::size_t t = 0; t < num_targets; ++t) {
      const TargetModel& target = entry.targets[t];
      targets[std::string(target_names[t])] = {{"polynomial", target.polynomial.coefficients},
                                               {"scale", {target.polynomial.lo, target.polynomial.hi}},
                                               {"forest", Ordered::parse(target.forest.json())}};
    }
    root["entries"].push_back({{"strategy", entry.strategy},
                               {"recompute", entry.recompute},
                               {"min_seq", entry.min_seq},
                               {"max_seq", entry.max_seq},
                               {"targets", std::move(targets)}});
  }

  write_file_atomically(path, [&](std::ostream& out) { out << root.dump() << '\n'; });
}

LearnedModel LearnedModel::load(const std::string& path) {
  const Json json = json_input::load_file(path);
  const Object root(json, path);
  root.require_keys({"format", "version", "model", "cluster", "degree", "batch", "source", "entries"});
  if (root.string("format") != format_name)
    root.fail("format", std::string("expected '") + format_name + "', got '" + root.string("format") + "'");
  if (root.positive_integer("version") != format_version)
    root.fail("version", "expected " + std::to_string(format_version) + ", got " +
                             std::to_string(root.positive_integer("version")));

  auto impl = std::make_shared<Impl>();
  impl->model = root.string("model");
  impl->cluster = root.string("cluster");
  const int64_t degree = root.positive_integer("degree");
  if (degree > std::numeric_limits<int>::max())
    root.fail("degree", "expected a parallel degree that fits an int, got " + std::to_string(degree));
  impl->degree = static_cast<int>(degree);
  impl->batch = root.positive_integer("batch");
  impl->source = root.string("source");
  if (!is_profile_source(impl->source))
    root.fail("source", "expected sim, analytic or real, got '" + impl->source + "'");

  const Json& entries = json.at("entries");
  if (!entries.is_array() || entries.empty())
    root.fail("entries", "expected a non-empty list of entries, got " + entries.dump().substr(0, 40));
  for (std::size_t i = 0; i < entries.size(); ++i) {
    Entry entry = load_entry(Object(entries[i], path, "entries[" + std::to_string(i) + "]"));
    if (impl->find(entry.strategy, entry.recompute))
      throw InputError(path, 0, "entries[" + std::to_string(i) + "]",
                       "expected each (strategy, recompute) once, got " + entry.strategy + "/" +
                           entry.recompute + " again");
    impl->entries.push_back(std::move(entry));
  }
  return LearnedModel(std::move(impl));
}

LearnedPrediction LearnedModel::predict(std::string_view strategy, std::string_view recompute,
                                        int64_t seq) const {
  const Entry& entry = impl_->at(strategy, recompute);
  LearnedPrediction prediction;
  prediction.extrapolated = seq < entry.min_seq || seq > entry.max_seq;
  for (std::size_t t = 0; t < num_targets; ++t) {
    const TargetModel& target = entry.targets[t];
    const double value = prediction.extrapolated ? target.polynomial.at(static_cast<double>(seq))
                                                 : std::exp(target.forest.predict_log(seq));
    prediction.*predicted[t] = std::max(value, 0.0);
  }
  return prediction;
}

bool LearnedModel::has(std::string_view strategy, std::string_view recompute) const {
  return impl_->find(strategy, recompute) != nullptr;
}

std::pair<int64_t, int64_t> LearnedModel::profiled_range(std::string_view strategy,
                                                         std::string_view recompute) const {
  const Entry& entry = impl_->at(strategy, recompute);
  return {entry.min_seq, entry.max_seq};
}

int LearnedModel::polynomial_degree(std::string_view strategy, std::string_view recompute,
                                    std::string_view target) const {
  return impl_->at(strategy, recompute).targets[parse_target(target)].polynomial.degree();
}

const std::string& LearnedModel::model_name() const {
  return impl_->model;
}
const std::string& LearnedModel::cluster_name() const {
  return impl_->cluster;
}
int LearnedModel::degree() const {
  return impl_->degree;
}
int64_t LearnedModel::batch() const {
  return impl_->batch;
}
const std::string& LearnedModel::source() const {
  return impl_->source;
}

}  // namespace paradyse::steps
