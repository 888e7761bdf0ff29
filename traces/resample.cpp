#include "traces/resample.hpp"

#include <fmt/format.h>

#include <random>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/errors.hpp"
#include "traces/random_draws.hpp"

namespace paradyse::traces {

void write_resampled_trace(const TraceSource& source, int64_t count, uint64_t seed, const std::string& path) {
  if (count < 1)
    throw InputError("--count", 0, "", "expected at least one length, got " + std::to_string(count));
  std::vector<int64_t> lengths;
  lengths.reserve(static_cast<std::size_t>(source.samples()));
  source.for_each([&](int64_t length) {
    lengths.push_back(length);
    return true;
  });
  std::mt19937_64 engine(seed);
  write_file_atomically(path, [&](std::ostream& out) {
    fmt::memory_buffer text;
    fmt::format_to(std::back_inserter(text), "# trace: {} lengths drawn with replacement from {} (seed {})\n",
                   count, source.name(), seed);
    fmt::format_to(std::back_inserter(text), "# source: {}\n", source.description());
    for (int64_t i = 0; i < count; ++i) {
      fmt::format_to(std::back_inserter(text), "{}\n", lengths[uniform_below(engine, lengths.size())]);
      if (text.size() >= (std::size_t{1} << 20) || i + 1 == count) {
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        text.clear();
      }
    }
  });
}

}  // namespace paradyse::traces
