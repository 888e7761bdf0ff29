// Writing an output file so that a failed run leaves nothing behind: everything goes to
// path + ".partial", which is renamed to path only once the whole file is written. And checking,
// before a run does its work, that its outputs can be written at all.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace paradyse {

// Calls `write` on the partial file. If it throws, or the file cannot be opened, written or renamed,
// the partial file is removed and an InputError naming the file says why (what `write` threw passes
// through unchanged).
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

enum class OutputKind { file, folder };

// InputError naming `flag` unless an output of `kind` can be written at `path`: a non-empty path whose
// last part is a name (not '.', '..' or '/'), not an existing entry of the other kind, in a folder
// that exists, or can be created, and is writable (a probe folder is made there and removed). Runs
// call it before their work, so that a bad path fails at once instead of after the whole job.
void check_output_path(const std::string& path, OutputKind kind, const std::string& flag);

}  // namespace paradyse
