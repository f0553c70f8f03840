// Stopwatch: the seconds since it started, on the steady clock — the one timer of the CLI
// (progress lines, elapsed times in reports).
#pragma once

#include <chrono>

namespace bufferlab::cli {

class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace bufferlab::cli
