// Short names for the BF16 conversions that kernel tests write on every line of hand-made data
// and checks: bf(v) the BF16 bits of v (round to nearest even), fl(b) the FP32 value of bits b.
#pragma once

#include <cstdint>

#include "bufferlab/core/number_formats.h"

namespace bufferlab::testing {

inline uint16_t bf(float v) { return f32_to_bf16_bits(v); }
inline float fl(uint16_t b) { return bf16_bits_to_f32(b); }

}  // namespace bufferlab::testing
