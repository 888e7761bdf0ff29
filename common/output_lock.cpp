#include "common/output_lock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include "common/atomic_file.hpp"
#include "common/errors.hpp"

namespace paradyse {

OutputLock::OutputLock(const std::string& folder, const std::string& flag) {
  namespace fs = std::filesystem;
  check_output_path(folder, OutputKind::folder, flag);
  const std::string key = fs::weakly_canonical(fs::absolute(folder)).string();
  const fs::path file = fs::temp_directory_path() /
                        ("paradyse-output-" + std::to_string(std::hash<std::string>{}(key)) + ".lock");
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0)
    throw InputError(file.string(), 0, "", std::string("cannot open the lock file: ") + std::strerror(errno));
  // A POSIX record lock belongs to this process alone: the workers it forks do not inherit it, so it
  // is free as soon as this process ends, even while they are still being killed. A run that has
  // just been killed may take a moment to end: wait up to a second before refusing.
  struct flock whole_file {};
  whole_file.l_type = F_WRLCK;
  whole_file.l_whence = SEEK_SET;
  for (int attempt = 0; ::fcntl(fd_, F_SETLK, &whole_file) != 0; ++attempt) {
    if (attempt == 50) {
      ::close(fd_);
      fd_ = -1;
      throw InputError(
          flag, 0, "",
          "'" + folder +
              "' is being written by another paradyse run; wait for it to end, or give another folder");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

OutputLock::~OutputLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace paradyse
