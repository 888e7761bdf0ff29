// Writing an output file so that a failed run leaves nothing behind: everything goes to
// path + ".partial", which is renamed to path only once the whole file is written.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace paradyse {

// Calls `write` on the partial file. If it throws, or the file cannot be opened, written or renamed,
// the partial file is removed and an InputError naming the file says why (what `write` threw passes
// through unchanged).
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace paradyse
