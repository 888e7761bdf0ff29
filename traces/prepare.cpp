// Preparing a trace for a run (see prepare.hpp for the order of the steps and why).
#include "traces/prepare.hpp"

#include <algorithm>
#include <random>
#include <sstream>
#include <utility>

#include "common/errors.hpp"
#include "common/limits.hpp"

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

// Uniform in [0, 1) from the top 53 bits of one draw.
double uniform_unit(std::mt19937_64& engine) {
  return static_cast<double>(engine() >> 11) * 0x1.0p-53;
}

// Uniform in [0, bound): draws below 2^64 mod bound are rejected, so that every value is equally likely.
uint64_t uniform_below(std::mt19937_64& engine, uint64_t bound) {
  const uint64_t rejected = (0 - bound) % bound;
  uint64_t draw = engine();
  while (draw < rejected) draw = engine();
  return draw % bound;
}

// Fisher-Yates, by hand: std::shuffle may draw differently in another standard library.
void shuffle(std::vector<int64_t>& lengths, std::mt19937_64& engine) {
  for (std::size_t i = lengths.size(); i > 1; --i)
    std::swap(lengths[i - 1], lengths[uniform_below(engine, i)]);
}

std::string describe(const Trace& trace, const PrepareOptions& options, int64_t sampled, int64_t limited,
                     const PreparedTrace& prepared) {
  std::ostringstream text;
  text << trace.name << ": " << trace.lengths.size() << " samples";
  if (trace.empty_samples > 0) text << " (" << trace.empty_samples << " empty ones skipped)";
  if (options.sample < 1)
    text << "; each kept with probability " << options.sample << " (seed " << options.seed << "): " << sampled
         << " kept";
  if (limited < sampled) text << "; the first " << limited << " of them";
  if (options.max_len > 0) {
    text << "; ";
    if (prepared.over_max == 0)
      text << "none";
    else
      text << prepared.over_max;
    text << " longer than " << options.max_len << " tokens";
    if (prepared.dropped > 0) text << ", dropped";
    if (prepared.truncated > 0) text << ", truncated to " << options.max_len;
    if (prepared.split_pieces > 0)
      text << ", split into " << prepared.split_pieces << " pieces of at most " << options.max_len;
  }
  int64_t tokens = 0;
  for (int64_t length : prepared.lengths) tokens += length;
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
  text << ": " << prepared.lengths.size() << " sequences, " << tokens << " tokens.";
  return text.str();
}

}  // namespace

PreparedTrace prepare(const Trace& trace, const PrepareOptions& options) {
  validate(options);
  PARADYSE_CHECK(!trace.lengths.empty(), "prepare needs a trace with samples, as load_trace gives");
  std::mt19937_64 engine(options.seed);

  std::vector<int64_t> kept;
  if (options.sample < 1) {
    for (int64_t length : trace.lengths)
      if (uniform_unit(engine) < options.sample) kept.push_back(length);
    if (kept.empty())
      throw InputError("--sample", 0, "",
                       "expected a probability that keeps at least one of the " +
                           std::to_string(trace.lengths.size()) + " samples, got '" +
                           number_text(options.sample) + "' (seed " + std::to_string(options.seed) +
                           " kept none)");
  } else {
    kept = trace.lengths;
  }
  const auto sampled = static_cast<int64_t>(kept.size());
  if (options.limit > 0 && options.limit < sampled) kept.resize(static_cast<std::size_t>(options.limit));
  const auto limited = static_cast<int64_t>(kept.size());

  // Counted before any is made: a cap of a few tokens would split a trace into billions of pieces.
  int64_t sequences = 0;
  for (int64_t length : kept)
    sequences += options.max_len > 0 && length > options.max_len
                     ? (options.over == OverRule::split ? (length + options.max_len - 1) / options.max_len
                        : options.over == OverRule::truncate ? 1
                                                             : 0)
                     : 1;
  if (sequences > kMaxRunSequences)
    throw InputError(options.over == OverRule::split && options.max_len > 0 ? "--max-len" : "--limit", 0, "",
                     "expected a run of at most " + std::to_string(kMaxRunSequences) + " sequences, got " +
                         std::to_string(sequences) +
                         " (--limit, --sample or a longer --max-len trains fewer)");

  PreparedTrace prepared;
  prepared.lengths.reserve(static_cast<std::size_t>(sequences));
  for (int64_t length : kept) {
    if (options.max_len == 0 || length <= options.max_len) {
      prepared.lengths.push_back(length);
      continue;
    }
    ++prepared.over_max;
    switch (options.over) {
      case OverRule::drop:
        ++prepared.dropped;
        break;
      case OverRule::truncate:
        ++prepared.truncated;
        prepared.lengths.push_back(options.max_len);
        break;
      case OverRule::split:
        for (int64_t rest = length; rest > 0; rest -= options.max_len) {
          prepared.lengths.push_back(std::min(rest, options.max_len));
          ++prepared.split_pieces;
        }
        break;
    }
  }
  if (prepared.lengths.empty())
    throw InputError("--max-len", 0, "",
                     "expected a cap that leaves at least one sample, got '" +
                         std::to_string(options.max_len) + "': all " + std::to_string(limited) +
                         " samples are longer, and --over drop drops them");

  switch (options.order) {
    case Order::dataset:
      break;
    case Order::sorted:
      std::sort(prepared.lengths.begin(), prepared.lengths.end());
      break;
    case Order::shuffled:
      shuffle(prepared.lengths, engine);
      break;
  }
  prepared.description = describe(trace, options, sampled, limited, prepared);
  return prepared;
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
