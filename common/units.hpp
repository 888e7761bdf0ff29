// Binary byte units, for printing sizes and reading them from user input (code and JSON keep bytes).
#pragma once

namespace paradyse {

inline constexpr double kKiB = 1024.0;
inline constexpr double kMiB = 1024.0 * kKiB;
inline constexpr double kGiB = 1024.0 * kMiB;

}  // namespace paradyse
