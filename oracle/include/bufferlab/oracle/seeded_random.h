// The one seeded generator of the project: SplitMix64 with exact derived draws, so every
// generator of inputs (the oracle's RMSNorm, MoE/FFN, mHC, GDN, Mamba-2 inputs, and the tests'
// seeded values) produces the same values on every platform (no <random> distributions, whose
// output is implementation-defined).
#pragma once

#include <cstdint>

namespace bufferlab::oracle {

// SplitMix64's finaliser: a bijective 64-bit mix, also usable as a counter-based hash.
constexpr uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// SplitMix64's golden-ratio increment.
inline constexpr uint64_t kSplitMix64Step = 0x9E3779B97F4A7C15ull;

// The SplitMix64 output that follows state z: a counter-based hash of z (seed derivation,
// per-case choices) that needs no generator object.
constexpr uint64_t splitmix64_hash(uint64_t z) { return splitmix64_mix(z + kSplitMix64Step); }

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64_mix(state_ += kSplitMix64Step); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1), exact
  // Mean 0, variance 1, support ±2·sqrt(3): the sum of four uniforms, centred and scaled.
  double normalish() { return (uniform() + uniform() + uniform() + uniform() - 2.0) * 1.7320508; }
  double between(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  uint64_t below(uint64_t n) { return next() % n; }
  int integer(int lo, int hi) { return lo + static_cast<int>(next() % (hi - lo + 1)); }

 private:
  uint64_t state_;
};

}  // namespace bufferlab::oracle
