// One run at a time per output folder. Two runs writing the same folder would both report success
// while only one result survived (compare), or run the same points twice and append their rows
// twice (sweep); the second is refused instead. The lock is a POSIX record lock on a file in the
// temporary folder named after the output folder's absolute path, so it leaves nothing in the output
// and is released by the kernel however its holder ends.
#pragma once

#include <string>

namespace paradyse {

class OutputLock {
 public:
  // InputError naming `flag` when `folder` cannot be written (check_output_path) or another process
  // holds its lock.
  OutputLock(const std::string& folder, const std::string& flag);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace paradyse
