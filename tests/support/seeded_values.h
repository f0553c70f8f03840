// Seeded test values shared by every kernel test, property and bench: value i depends only on
// (i, seed) through the oracle's SplitMix64 mix (one generator for the whole project), so a
// test's inputs are the same on every platform and a prefix stays stable when n grows.
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/seeded_random.h"

namespace bufferlab::testing {

// The counter-based draw behind seeded_values: SplitMix64's output for state x.
inline uint64_t seeded_draw(uint64_t x) { return oracle::splitmix64_hash(x); }

// Value i of stream `seed`: in [offset − scale, offset + scale), on a grid of 2^16 steps (exact
// in FP32 for a power-of-two scale).
inline float seeded_value(uint64_t i, uint64_t seed, float scale, float offset = 0.0f) {
  const auto q = static_cast<int64_t>(seeded_draw(i * 0x100000001B3ull + seed) >> 48) - 32768;
  return offset + scale * static_cast<float>(q) / 32768.0f;
}

// Values 0 .. n−1 of stream `seed` (seeded_value).
inline std::vector<float> seeded_values(uint64_t n, uint64_t seed, float scale,
                                        float offset = 0.0f) {
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = seeded_value(i, seed, scale, offset);
  return v;
}

// The same values rounded to BF16 (bits).
inline std::vector<uint16_t> seeded_bf16_values(uint64_t n, uint64_t seed, float scale,
                                                float offset = 0.0f) {
  const std::vector<float> v = seeded_values(n, seed, scale, offset);
  std::vector<uint16_t> b(n);
  for (uint64_t i = 0; i < n; ++i) b[i] = f32_to_bf16_bits(v[i]);
  return b;
}

}  // namespace bufferlab::testing
