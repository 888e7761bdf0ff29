// A one-line progress bar on the terminal (stderr), for runs longer than a few seconds; silent when
// stderr is not a terminal, so that logs and tests see no control characters.
#pragma once

#include <chrono>
#include <string>

namespace paradyse::cli {

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled), start_(std::chrono::steady_clock::now()) {}
  void update(int64_t done, int64_t total, const std::string& what);
  void finish();

 private:
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace paradyse::cli
