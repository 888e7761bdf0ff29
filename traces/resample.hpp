// Long traces with a real trace's length distribution: `count` lengths drawn uniformly, with
// replacement, from a trace's samples. For runs far longer than any bundled trace (the memory and
// speed of a compare over 10^8 sequences) without shipping a file of that size.
#pragma once

#include <cstdint>
#include <string>

#include "traces/trace.hpp"

namespace paradyse::traces {

// Writes the plain format to `path` (through path + ".partial", renamed at the end), a header naming
// the source and the seed, one length a line, without holding the lengths it writes. The same source,
// count and seed give the same file on every platform. InputError naming --count for a count below 1.
void write_resampled_trace(const TraceSource& source, int64_t count, uint64_t seed, const std::string& path);

}  // namespace paradyse::traces
