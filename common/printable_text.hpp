// Text from a user's file or command line, made safe to print on a terminal: an escape sequence, a NUL
// or a binary byte echoed raw into an error message can change the terminal's state or hide the rest.
#pragma once

#include <string>
#include <string_view>

namespace paradyse {

// `text` with control characters other than newline and tab, and DEL, written as \xNN, and every byte
// that is not part of valid UTF-8 replaced by U+FFFD; printable UTF-8 text passes unchanged.
std::string printable_text(std::string_view text);

}  // namespace paradyse
