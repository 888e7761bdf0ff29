// Length-delimited Protobuf messages, as a Chakra trace file holds them: each message's size in bytes
// as a base-128 varint, then the message (Chakra's encode_message and decode_message). Private to
// chakra/.
#pragma once

#include <google/protobuf/message.h>

#include <cstddef>
#include <string>

namespace paradyse::chakra {

// Appends `message`, length-delimited, to `out`.
void append_delimited(const google::protobuf::Message& message, std::string& out);

// Reads the messages of a file's bytes in turn. Every error is an InputError naming the file and the
// message being read (`field`: "metadata", "node[12]").
class DelimitedReader {
 public:
  DelimitedReader(const std::string& bytes, std::string source) : bytes_(bytes), source_(std::move(source)) {}

  bool done() const { return offset_ == bytes_.size(); }
  // Parses the next message into `message`: refused when the file ends inside it, when its bytes do not
  // parse, or when they hold a field of the wrong wire type or one numbered above `last_schema_field`,
  // the last of Chakra's schema (another message's bytes). Fields of Chakra's schema that et_def.proto
  // leaves out are kept as unknown.
  void read(google::protobuf::Message& message, const std::string& field, int last_schema_field);

 private:
  const std::string& bytes_;
  std::string source_;
  std::size_t offset_ = 0;
};

}  // namespace paradyse::chakra
