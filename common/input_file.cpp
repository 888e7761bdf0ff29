#include "common/input_file.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/errors.hpp"

namespace paradyse {

std::string bytes_text(int64_t bytes) {
  for (const auto& [unit, size] :
       {std::pair{"GiB", int64_t{1} << 30}, {"MiB", int64_t{1} << 20}, {"KiB", int64_t{1} << 10}})
    if (bytes >= size && bytes % size == 0) return std::to_string(bytes / size) + " " + unit;
  return std::to_string(bytes) + " bytes";
}

std::string read_input_file(const std::string& path, const InputFileBounds& bounds) {
  const std::string kind(bounds.kind);
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status))
    throw InputError(path, 0, "", "expected a " + kind + " file, got no such file");
  if (std::filesystem::is_directory(status))
    throw InputError(path, 0, "", "expected a " + kind + " file, got a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(path, 0, "", "expected a readable " + kind + " file, got one that cannot be opened");

  std::string text;
  int line = 1;
  int64_t line_bytes = 0;
  std::string chunk(1 << 20, '\0');
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0) break;
    if (static_cast<int64_t>(text.size() + got) > bounds.max_bytes)
      throw InputError(
          path, 0, "",
          "expected a " + kind + " file of at most " + bytes_text(bounds.max_bytes) + ", got a larger one");
    for (std::size_t at = 0; bounds.max_line_bytes > 0 && at < got;) {
      const auto* end = static_cast<const char*>(std::memchr(chunk.data() + at, '\n', got - at));
      const std::size_t stop = end == nullptr ? got : static_cast<std::size_t>(end - chunk.data());
      line_bytes += static_cast<int64_t>(stop - at);
      if (line_bytes > bounds.max_line_bytes)
        throw InputError(path, line, "",
                         "expected lines of at most " + bytes_text(bounds.max_line_bytes) + " in a " + kind +
                             " file, got a longer one");
      if (end == nullptr) break;
      ++line;
      line_bytes = 0;
      at = stop + 1;
    }
    text.append(chunk.data(), got);
  }
  if (in.bad()) throw InputError(path, 0, "", "expected a readable " + kind + " file, got a read error");
  return text;
}

}  // namespace paradyse
