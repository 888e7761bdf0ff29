// Preparing a trace for a run (see prepare.hpp for the order of the steps and why).
#include "traces/prepare.hpp"

#include <algorithm>
#include <random>
#include <sstream>
#include <utility>

#include "common/errors.hpp"
#include "common/limits.hpp"
#include "traces/random_draws.hpp"

namespace paradyse::traces {
namespace {

std::string number_text(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

void validate(const PrepareOptions& options) {
  if (!(options.sample > 0 && options.sample <= 1))
    throw InputError("--sample", 0, "",
                     "expected a probability in (0, 1], got '" + number_text(options.sample) + "'");
  if (options.limit < 0)
    throw InputError(
        "--limit", 0, "",
        "expected 0 (every sample) or a positive count, got '" + std::to_string(options.limit) + "'");
  if (options.max_len < 0)
    throw InputError(
        "--max-len", 0, "",
        "expected 0 (no cap) or a positive token count, got '" + std::to_string(options.max_len) + "'");
}

// Fisher-Yates, by hand: std::shuffle may draw differently in another standard library.
void shuffle(std::vector<int32_t>& lengths, std::mt19937_64& engine) {
  for (std::size_t i = lengths.size(); i > 1; --i)
    std::swap(lengths[i - 1], lengths[uniform_below(engine, i)]);
}

std::string describe(const TraceSource& source, const PrepareOptions& options, int64_t sampled,
                     int64_t limited, const PreparedLengths& prepared) {
  std::ostringstream text;
  text << source.name() << ": " << source.samples() << " samples";
  if (source.empty_samples() > 0) text << " (" << source.empty_samples() << " empty ones skipped)";
  if (options.sample < 1)
    text << "; each kept with probability " << options.sample << " (seed " << options.seed << "): " << sampled
         << " kept";
  if (limited < sampled) text << "; the first " << limited << " of them";
  if (options.max_len > 0) {
    text << "; ";
    if (prepared.over_max() == 0)
      text << "none";
    else
      text << prepared.over_max();
    text << " longer than " << options.max_len << " tokens";
    if (prepared.dropped() > 0) text << ", dropped";
    if (prepared.truncated() > 0) text << ", truncated to " << options.max_len;
    if (prepared.split_pieces() > 0)
      text << ", split into " << prepared.split_pieces() << " pieces of at most " << options.max_len;
  }
  switch (options.order) {
    case Order::dataset:
      text << "; in dataset order";
      break;
    case Order::sorted:
      text << "; sorted short to long";
      break;
    case Order::shuffled:
      text << "; shuffled (seed " << options.seed << ")";
      break;
  }
  text << ": " << prepared.sequences() << " sequences, " << prepared.tokens() << " tokens.";
  return text.str();
}

// Sampling's draw for one sample of the trace (none when every sample is kept): true when it is left out.
bool sampled_out(std::mt19937_64& engine, double sample) {
  return sample < 1 && !(uniform_unit(engine) < sample);
}

}  // namespace

PreparedLengths::PreparedLengths(std::shared_ptr<const TraceSource> source, const PrepareOptions& options)
    : source_(std::move(source)), options_(options) {
  validate(options);
  PARADYSE_CHECK(source_->samples() > 0, "prepare needs a trace with samples, as load_trace gives");
  const int64_t max_len = options.max_len;
  std::mt19937_64 engine(options.seed);
  int64_t limited = 0;
  // Counted as the trace is read, pieces made only where the order keeps them: a cap of a few tokens
  // would split a trace into billions of pieces.
  const int64_t sampled = walk(engine, true, [&](int64_t length) {
    ++limited;
    const bool over = max_len > 0 && length > max_len;
    const int64_t pieces = !over                                ? 1
                           : options.over == OverRule::split    ? (length + max_len - 1) / max_len
                           : options.over == OverRule::truncate ? 1
                                                                : 0;
    sequences_ += pieces;
    if (over) {
      ++over_max_;
      dropped_ += options.over == OverRule::drop ? 1 : 0;
      truncated_ += options.over == OverRule::truncate ? 1 : 0;
      split_pieces_ += options.over == OverRule::split ? pieces : 0;
    }
    if (options.order == Order::dataset || sequences_ > kMaxRunSequences) {
      tokens_ += pieces == 0 ? 0 : over && options.over == OverRule::truncate ? max_len : length;
      return;
    }
    cap(length, [&](int64_t piece) {
      tokens_ += piece;
      if (options.order == Order::sorted)
        ++sorted_counts_[piece];
      else
        shuffled_.push_back(static_cast<int32_t>(piece));
    });
  });
  if (sampled == 0)
    throw InputError("--sample", 0, "",
                     "expected a probability that keeps at least one of the " +
                         std::to_string(source_->samples()) + " samples, got '" +
                         number_text(options.sample) + "' (seed " + std::to_string(options.seed) +
                         " kept none)");
  if (sequences_ > kMaxRunSequences)
    throw InputError(options.over == OverRule::split && max_len > 0 ? "--max-len" : "--limit", 0, "",
                     "expected a run of at most " + std::to_string(kMaxRunSequences) + " sequences, got " +
                         std::to_string(sequences_) +
                         " (--limit, --sample or a longer --max-len trains fewer)");
  if (sequences_ == 0)
    throw InputError("--max-len", 0, "",
                     "expected a cap that leaves at least one sample, got '" + std::to_string(max_len) +
                         "': all " + std::to_string(limited) +
                         " samples are longer, and --over drop drops them");
  if (options.order == Order::shuffled) shuffle(shuffled_, engine);
  description_ = describe(*source_, options, sampled, limited, *this);
}

int64_t PreparedLengths::walk(std::mt19937_64& engine, bool whole_trace,
                              const std::function<void(int64_t)>& kept) const {
  int64_t sampled = 0;
  source_->for_each([&](int64_t length) {
    if (sampled_out(engine, options_.sample)) return true;
    ++sampled;
    const bool within = options_.limit == 0 || sampled <= options_.limit;
    if (within) kept(length);
    return within || (whole_trace && options_.sample < 1);
  });
  return options_.sample < 1 ? sampled : source_->samples();
}

void PreparedLengths::cap(int64_t length, const std::function<void(int64_t)>& piece) const {
  const int64_t max_len = options_.max_len;
  if (max_len == 0 || length <= max_len) {
    piece(length);
    return;
  }
  switch (options_.over) {
    case OverRule::drop:
      break;
    case OverRule::truncate:
      piece(max_len);
      break;
    case OverRule::split:
      for (int64_t rest = length; rest > 0; rest -= max_len) piece(std::min(rest, max_len));
      break;
  }
}

void PreparedLengths::for_each(const std::function<void(int64_t)>& length) const {
  switch (options_.order) {
    case Order::dataset: {
      std::mt19937_64 engine(options_.seed);
      walk(engine, false, [&](int64_t kept) { cap(kept, length); });
      break;
    }
    case Order::sorted:
      for (const auto& [value, count] : sorted_counts_)
        for (int64_t i = 0; i < count; ++i) length(value);
      break;
    case Order::shuffled:
      for (const int32_t value : shuffled_) length(value);
      break;
  }
}

std::vector<int64_t> PreparedLengths::lengths() const {
  std::vector<int64_t> all;
  all.reserve(static_cast<std::size_t>(sequences_));
  for_each([&](int64_t length) { all.push_back(length); });
  return all;
}

PreparedTrace prepare(const Trace& trace, const PrepareOptions& options) {
  const PreparedLengths prepared(std::make_shared<const TraceSource>(trace), options);
  return {.lengths = prepared.lengths(),
          .over_max = prepared.over_max(),
          .dropped = prepared.dropped(),
          .truncated = prepared.truncated(),
          .split_pieces = prepared.split_pieces(),
          .description = prepared.description()};
}

Order parse_order(const std::string& text) {
  if (text == "dataset") return Order::dataset;
  if (text == "sorted") return Order::sorted;
  if (text == "shuffled") return Order::shuffled;
  throw InputError("--order", 0, "", "expected dataset, sorted or shuffled, got '" + text + "'");
}

OverRule parse_over_rule(const std::string& text) {
  if (text == "drop") return OverRule::drop;
  if (text == "truncate") return OverRule::truncate;
  if (text == "split") return OverRule::split;
  throw InputError("--over", 0, "", "expected drop, truncate or split, got '" + text + "'");
}

}  // namespace paradyse::traces
