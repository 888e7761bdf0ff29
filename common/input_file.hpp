// Reading a user's input file whole, within a stated bound, so that a device, a pipe that never ends
// or a file of the wrong kind is refused by name instead of taking the machine's memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace paradyse {

struct InputFileBounds {
  std::string_view kind;       // "trace", "model": what the file was expected to be, for messages
  int64_t max_bytes = 0;       // the whole file
  int64_t max_line_bytes = 0;  // one line, '\n' excluded; 0: no bound on lines (binary formats)
};

// The file's bytes; an InputError naming `path` when it is missing, a directory, unreadable, or past
// a bound (the line's number for a line too long). Reads /dev/stdin, pipes and devices like a file.
std::string read_input_file(const std::string& path, const InputFileBounds& bounds);

// The file's lines, one at a time, read a block at a time so that memory does not grow with the file:
// `line` gets each line without its line end (LF, or CRLF) and its number from 1; a final line end
// ends the last line instead of starting an empty one. Errors as read_input_file's.
void for_each_input_line(const std::string& path, const InputFileBounds& bounds,
                         const std::function<void(std::string_view, int)>& line);

// "64 MiB", "16 KiB", "100 bytes": a bound as a person reads it.
std::string bytes_text(int64_t bytes);

}  // namespace paradyse
