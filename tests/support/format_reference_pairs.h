// Pairs of conversions to cross-check: BufferLab's own (core/number_formats.h) and CUDA's
// host-side ones from cuda_bf16.h / cuda_fp8.h / cuda_fp4.h. Test-only: core never includes
// CUDA headers; these tests do, compiled by the host compiler.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>

#include "bufferlab/core/number_formats.h"

namespace bufferlab::testing {

inline float f32_from_bits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

inline uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

inline uint32_t cuda_bf16(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
inline uint32_t cuda_e4m3(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
inline uint32_t cuda_e2m1(float x) { return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest); }

inline uint32_t ours_bf16(float x) { return f32_to_bf16_bits(x); }
inline uint32_t ours_e4m3(float x) { return f32_to_e4m3_bits(x); }
inline uint32_t ours_e2m1(float x) { return f32_to_e2m1_bits(x); }

}  // namespace bufferlab::testing
