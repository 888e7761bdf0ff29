#include "common/printable_text.hpp"

#include <fmt/core.h>

#include "common/json_input.hpp"

namespace paradyse {

std::string printable_text(std::string_view text) {
  std::string out;
  for (const char c : json_input::valid_utf8(text)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 && c != '\n' && c != '\t')
      out += fmt::format("\\x{:02X}", byte);
    else if (byte == 0x7F)
      out += "\\x7F";
    else
      out.push_back(c);
  }
  return out;
}

}  // namespace paradyse
