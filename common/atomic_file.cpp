#include "common/atomic_file.hpp"

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

}  // namespace paradyse
