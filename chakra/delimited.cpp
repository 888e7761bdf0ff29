#include "chakra/delimited.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>

#include <limits>

// Protobuf logs a string field's bad UTF-8 on stderr as it parses; the InputError says it all. (Protobuf
// 22 and later log through Abseil instead, and have no LogSilencer.)
#if __has_include(<google/protobuf/stubs/logging.h>)
#include <google/protobuf/stubs/logging.h>
#define PARADYSE_PROTOBUF_LOG_SILENCER 1
#endif

#include "common/errors.hpp"

namespace paradyse::chakra {

void append_delimited(const google::protobuf::Message& message, std::string& out) {
  const std::size_t size = message.ByteSizeLong();
  PARADYSE_CHECK(size <= std::numeric_limits<uint32_t>::max(), "a Chakra message of 4 GiB or more");
  auto length = static_cast<uint32_t>(size);
  do {  // base-128 varint, low bits first
    const auto byte = static_cast<char>((length & 0x7f) | (length > 0x7f ? 0x80 : 0));
    out.push_back(byte);
    length >>= 7;
  } while (length != 0);
  PARADYSE_CHECK(message.AppendToString(&out), "a Chakra message failed to serialize");
}

void DelimitedReader::read(google::protobuf::Message& message, const std::string& field,
                           int last_schema_field) {
  const std::string what = "a Chakra " + message.GetDescriptor()->name() + " message";
  // The length: at most 5 varint bytes (a message under 4 GiB).
  uint64_t length = 0;
  int shift = 0;
  for (;;) {
    if (offset_ == bytes_.size())
      throw InputError(source_, 0, field,
                       "expected the length of " + what + ", got the end of the file inside it (truncated)");
    const auto byte = static_cast<uint8_t>(bytes_[offset_++]);
    length |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) break;
    shift += 7;
    if (shift >= 35)
      throw InputError(source_, 0, field,
                       "expected the length of " + what + ", got a varint of over 5 bytes");
  }
  const std::size_t left = bytes_.size() - offset_;
  if (length > left)
    throw InputError(source_, 0, field,
                     "expected " + what + " of " + std::to_string(length) +
                         " bytes, got the end of the file " + std::to_string(left) +
                         " bytes into it (truncated)");
  message.Clear();
#ifdef PARADYSE_PROTOBUF_LOG_SILENCER
  const google::protobuf::LogSilencer quiet;
#endif
  if (!message.ParseFromArray(bytes_.data() + offset_, static_cast<int>(length)))
    throw InputError(
        source_, 0, field,
        "expected " + what + ", got " + std::to_string(length) + " bytes that do not parse as one");
  offset_ += length;
  const google::protobuf::UnknownFieldSet& unknown = message.GetReflection()->GetUnknownFields(message);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const int number = unknown.field(i).number();
    if (message.GetDescriptor()->FindFieldByNumber(number) != nullptr)
      throw InputError(source_, 0, field,
                       "expected " + what + ", got bytes whose field " + std::to_string(number) +
                           " has another wire type than the schema's (another message's bytes?)");
    if (number > last_schema_field)
      throw InputError(source_, 0, field,
                       "expected " + what + ", got bytes with a field " + std::to_string(number) +
                           ", which Chakra's schema does not have (another message's bytes?)");
  }
}

}  // namespace paradyse::chakra
