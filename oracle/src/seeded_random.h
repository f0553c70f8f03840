// The oracle's one seeded generator: SplitMix64 with exact derived draws, so every generator of
// inputs (RMSNorm, MoE/FFN, mHC, GDN, Mamba-2) produces the same values on every platform (no
// <random> distributions, whose output is implementation-defined). Private to the oracle.
#pragma once

#include <cstdint>

namespace bufferlab::oracle::detail {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1), exact
  // Mean 0, variance 1, support ±2·sqrt(3): the sum of four uniforms, centred and scaled.
  double normalish() { return (uniform() + uniform() + uniform() + uniform() - 2.0) * 1.7320508; }
  double between(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  uint64_t below(uint64_t n) { return next() % n; }
  int integer(int lo, int hi) { return lo + static_cast<int>(next() % (hi - lo + 1)); }

 private:
  uint64_t state_;
};

}  // namespace bufferlab::oracle::detail
