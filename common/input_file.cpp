#include "common/input_file.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "common/errors.hpp"

namespace paradyse {

std::string bytes_text(int64_t bytes) {
  for (const auto& [unit, size] :
       {std::pair{"GiB", int64_t{1} << 30}, {"MiB", int64_t{1} << 20}, {"KiB", int64_t{1} << 10}})
    if (bytes >= size && bytes % size == 0) return std::to_string(bytes / size) + " " + unit;
  return std::to_string(bytes) + " bytes";
}

namespace {

std::ifstream open_input(const std::string& path, const std::string& kind) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status))
    throw InputError(path, 0, "", "expected a " + kind + " file, got no such file");
  if (std::filesystem::is_directory(status))
    throw InputError(path, 0, "", "expected a " + kind + " file, got a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(path, 0, "", "expected a readable " + kind + " file, got one that cannot be opened");
  return in;
}

[[noreturn]] void too_large(const std::string& path, const InputFileBounds& bounds) {
  throw InputError(path, 0, "",
                   "expected a " + std::string(bounds.kind) + " file of at most " +
                       bytes_text(bounds.max_bytes) + ", got a larger one");
}

[[noreturn]] void line_too_long(const std::string& path, int line, const InputFileBounds& bounds) {
  throw InputError(path, line, "",
                   "expected lines of at most " + bytes_text(bounds.max_line_bytes) + " in a " +
                       std::string(bounds.kind) + " file, got a longer one");
}

[[noreturn]] void read_error(const std::string& path, const InputFileBounds& bounds) {
  throw InputError(path, 0, "",
                   "expected a readable " + std::string(bounds.kind) + " file, got a read error");
}

}  // namespace

void for_each_input_line(const std::string& path, const InputFileBounds& bounds,
                         const std::function<void(std::string_view, int)>& line) {
  std::ifstream in = open_input(path, std::string(bounds.kind));
  std::string block(1 << 20, '\0');
  std::string partial;  // the start of a line that continues into the next block
  int number = 0;
  int64_t read = 0;
  const auto emit = [&](std::string_view text) {
    if (text.ends_with('\r')) text.remove_suffix(1);
    line(text, ++number);
  };
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0) break;
    read += static_cast<int64_t>(got);
    if (read > bounds.max_bytes) too_large(path, bounds);
    std::string_view rest(block.data(), got);
    for (std::size_t end = rest.find('\n'); end != std::string_view::npos; end = rest.find('\n')) {
      if (bounds.max_line_bytes > 0 && static_cast<int64_t>(partial.size() + end) > bounds.max_line_bytes)
        line_too_long(path, number + 1, bounds);
      if (partial.empty()) {
        emit(rest.substr(0, end));
      } else {
        partial.append(rest.substr(0, end));
        emit(partial);
        partial.clear();
      }
      rest.remove_prefix(end + 1);
    }
    if (bounds.max_line_bytes > 0 &&
        static_cast<int64_t>(partial.size() + rest.size()) > bounds.max_line_bytes)
      line_too_long(path, number + 1, bounds);
    partial.append(rest);
  }
  if (in.bad()) read_error(path, bounds);
  if (!partial.empty()) emit(partial);
}

std::string read_input_file(const std::string& path, const InputFileBounds& bounds) {
  const std::string kind(bounds.kind);
  std::ifstream in = open_input(path, kind);

  std::string text;
  int line = 1;
  int64_t line_bytes = 0;
  // Not zero-filled: most input files are a few KB, and clearing a large buffer for each would cost
  // more than reading them.
  constexpr std::size_t kChunkBytes = 1 << 16;
  const auto chunk = std::make_unique_for_overwrite<char[]>(kChunkBytes);
  while (in) {
    in.read(chunk.get(), static_cast<std::streamsize>(kChunkBytes));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0) break;
    if (static_cast<int64_t>(text.size() + got) > bounds.max_bytes) too_large(path, bounds);
    for (std::size_t at = 0; bounds.max_line_bytes > 0 && at < got;) {
      const auto* end = static_cast<const char*>(std::memchr(chunk.get() + at, '\n', got - at));
      const std::size_t stop = end == nullptr ? got : static_cast<std::size_t>(end - chunk.get());
      line_bytes += static_cast<int64_t>(stop - at);
      if (line_bytes > bounds.max_line_bytes) line_too_long(path, line, bounds);
      if (end == nullptr) break;
      ++line;
      line_bytes = 0;
      at = stop + 1;
    }
    text.append(chunk.get(), got);
  }
  if (in.bad()) read_error(path, bounds);
  return text;
}

}  // namespace paradyse
