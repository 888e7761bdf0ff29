#include "experiments/progress_bar.hpp"

#include <fmt/core.h>

#include <cstdio>

namespace paradyse::cli {

void ProgressBar::update(int64_t done, int64_t total, const std::string& what) {
  if (!enabled_ || total <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  // Only after two seconds, and then five times a second at most.
  if (now - start_ < std::chrono::seconds(2) || now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  shown_ = true;
  constexpr int kWidth = 30;
  const double fraction = static_cast<double>(done) / static_cast<double>(total);
  const int filled = static_cast<int>(fraction * kWidth);
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  fmt::print(stderr, "\r[{}{}] {:3.0f} %  {:.0f} s  {:<40.40}",
             std::string(static_cast<std::size_t>(filled), '='),
             std::string(static_cast<std::size_t>(kWidth - filled), ' '), 100 * fraction, elapsed, what);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (shown_) fmt::print(stderr, "\r{:<90}\r", "");
}

}  // namespace paradyse::cli
