#include "common/atomic_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/errors.hpp"

namespace paradyse {

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out)
      throw InputError(path, 0, "", "expected a file that can be written, got one that cannot be opened");
    try {
      write(out);
    } catch (...) {
      out.close();
      std::filesystem::remove(partial);
      throw;
    }
    out.close();
    if (!out) {
      std::filesystem::remove(partial);
      throw InputError(path, 0, "", "expected to write the whole file, got a write error (disk full?)");
    }
  }
  std::error_code error;
  std::filesystem::rename(partial, path, error);
  if (error) {
    std::filesystem::remove(partial, error);
    throw InputError(path, 0, "", "expected to rename " + partial + " into place, got: " + error.message());
  }
}

void check_output_path(const std::string& path, OutputKind kind, const std::string& flag) {
  namespace fs = std::filesystem;
  const std::string what = kind == OutputKind::folder ? "folder" : "file";
  const auto fail = [&](const std::string& why) {
    throw InputError(flag, 0, "", "expected the path of a " + what + " to write, got '" + path + "': " + why);
  };
  if (path.empty()) fail("an empty path");
  fs::path target(path);
  while (target.has_relative_path() && target.filename().empty()) target = target.parent_path();  // "out/"
  const fs::path name = target.filename();
  if (name.empty() || name == "." || name == "..") fail("its last part is not a name");
  // The file system's bounds on a name and a path, with room for the ".partial" and ".lock" names
  // written beside the output.
  constexpr std::size_t kSuffixBytes = 16;
  for (const fs::path& part : target)
    if (part.native().size() + (part == name ? kSuffixBytes : 0) > NAME_MAX)
      fail("a part of it is " + std::to_string(part.native().size()) +
           " bytes long, and a name may have at most " +
           std::to_string(NAME_MAX - (part == name ? kSuffixBytes : 0)) + " here");
  if (path.size() + kSuffixBytes >= PATH_MAX)
    fail("it is " + std::to_string(path.size()) + " bytes long, and a path may have at most " +
         std::to_string(PATH_MAX - kSuffixBytes - 1));
  std::error_code error;
  const fs::file_status status = fs::status(target, error);
  if (kind == OutputKind::folder && fs::exists(status) && !fs::is_directory(status))
    fail("it exists and is not a folder");
  if (kind == OutputKind::file && fs::is_directory(status)) fail("it is a folder");

  // The nearest folder that exists must be writable: whatever is missing below it is created there.
  fs::path folder = fs::absolute(target, error).parent_path();
  while (!folder.empty() && !fs::exists(folder, error) && folder != folder.root_path())
    folder = folder.parent_path();
  if (!fs::is_directory(folder, error)) fail("'" + folder.string() + "' is not a folder");
  std::string probe = (folder / ".paradyse-probe-XXXXXX").string();
  if (::mkdtemp(probe.data()) == nullptr)
    fail("cannot create anything in '" + folder.string() + "' (" + std::strerror(errno) + ")");
  ::rmdir(probe.c_str());
}

}  // namespace paradyse
