// The Protobuf trace format (traces/trace.proto): reading it into a Trace and writing a Trace in it. The
// generated code stays inside traces/; the rest of the program sees only Trace.
#include <filesystem>
#include <fstream>
#include <string>

#include "common/errors.hpp"

#include "common/atomic_file.hpp"
#include "trace.pb.h"
#include "traces/readers.hpp"

namespace paradyse::traces {
namespace detail {

Trace read_protobuf(const std::string& bytes, const std::string& source) {
  pb::Trace message;
  if (!message.ParseFromString(bytes))
    throw InputError(
        source, 0, "",
        "expected a trace in the Protobuf form of traces/trace.proto, got bytes that do not parse "
        "as one");
  Trace trace;
  trace.name = message.name();
  trace.description = message.description();
  // A file written by another program may hold zeros or negative numbers: the same rules as the text
  // formats apply.
  for (int i = 0; i < message.lengths_size(); ++i) {
    const int64_t length = message.lengths(i);
    if (length < 0)
      throw InputError(
          source, 0, "lengths[" + std::to_string(i) + "]",
          "expected a non-negative whole number of tokens, got '" + std::to_string(length) + "'");
    add_sample(trace, length, source, 0, "lengths[" + std::to_string(i) + "]");
  }
  if (message.empty_samples() < 0)
    throw InputError(source, 0, "empty_samples",
                     "expected a non-negative count, got '" + std::to_string(message.empty_samples()) + "'");
  trace.empty_samples += message.empty_samples();
  return trace;
}

}  // namespace detail

void write_protobuf_trace(const Trace& trace, const std::string& path) {
  pb::Trace message;
  message.set_name(trace.name);
  message.set_description(trace.description);
  message.mutable_lengths()->Reserve(static_cast<int>(trace.lengths.size()));
  for (int64_t length : trace.lengths) message.add_lengths(length);
  message.set_empty_samples(trace.empty_samples);
  std::string bytes;
  PARADYSE_CHECK(message.SerializeToString(&bytes), "a trace message failed to serialize");

  write_file_atomically(
      path, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

}  // namespace paradyse::traces
