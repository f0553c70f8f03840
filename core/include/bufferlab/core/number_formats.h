// Low-precision number formats of the workspace (docs/spec/numerics.md §0): BF16, FP8 E4M3 (fn) and
// FP4 E2M1 encoders and decoders, usable on host and device. Encoders round to nearest even and
// reproduce CUDA's conversions bit for bit on every FP32 input (tests/format_xcheck, tests/slow):
//   BF16  overflows to ±Inf; every NaN becomes 0x7FFF (sign and payload dropped).
//   E4M3  saturates to ±448 (0x7E / 0xFE), ±Inf included; every NaN becomes 0x7F.
//   E2M1  saturates to ±6 (0x7 / 0xF), ±Inf included; every NaN becomes 0x7 (+6).
// Underflow keeps the sign (-tiny → -0). Decoders are exact; the E2M1 code is the low nibble.
#pragma once

#include <cstdint>

#include "bufferlab/core/hd.h"

#if defined(__has_builtin)
#if !__has_builtin(__builtin_bit_cast)
#error "number_formats.h needs __builtin_bit_cast (GCC 11+, Clang 9+, nvcc 11+)"
#endif
#endif

namespace bufferlab {

namespace number_formats_detail {

// __builtin_bit_cast keeps the codecs constexpr and is understood by GCC, Clang and nvcc alike,
// where std::bit_cast is not callable from device code.
BUFFERLAB_HD constexpr uint32_t f32_bits(float x) { return __builtin_bit_cast(uint32_t, x); }
BUFFERLAB_HD constexpr float f32_from_bits(uint32_t b) { return __builtin_bit_cast(float, b); }

constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32InfBits = 0x7F800000u;
constexpr uint32_t kF32QuietNan = 0x7FC00000u;
constexpr int kF32MantissaBits = 23;
constexpr int kF32Bias = 127;

// v / 2^shift rounded to nearest, ties to even; 1 <= shift <= 31.
BUFFERLAB_HD constexpr uint32_t shift_right_rne(uint32_t v, int shift) {
  const uint32_t kept = v >> shift;
  const uint32_t rest = v & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  const bool up = rest > half || (rest == half && (kept & 1u) != 0);
  return kept + (up ? 1u : 0u);
}

// Encodes |x| (as FP32 bits, finite, below the format's saturation threshold) into a small
// float format with `man_bits` mantissa bits and exponent bias `bias`, without the sign. The
// normal and subnormal cases share the rounding: a mantissa carry moves into the exponent, and a
// subnormal that rounds up to the smallest normal lands on exactly its code.
BUFFERLAB_HD constexpr uint32_t encode_small_magnitude(uint32_t abs_bits, int man_bits, int bias) {
  const int drop = kF32MantissaBits - man_bits;
  const int exp = static_cast<int>(abs_bits >> kF32MantissaBits) - kF32Bias;  // unbiased
  if (exp >= 1 - bias) {
    // Rebias the exponent in place; then exponent|mantissa is one integer to round.
    const uint32_t rebias = static_cast<uint32_t>(kF32Bias - bias) << kF32MantissaBits;
    return shift_right_rne(abs_bits - rebias, drop);
  }
  // Subnormal target: count units of the smallest subnormal, 2^(1 - bias - man_bits). FP32
  // subnormal inputs (exponent field 0) are far below half a unit and encode as zero.
  const uint32_t exp_field = abs_bits >> kF32MantissaBits;
  if (exp_field == 0) return 0;
  const uint32_t significand = (abs_bits & 0x7FFFFFu) | 0x800000u;
  const int shift = (1 - bias - man_bits) - (exp - kF32MantissaBits);
  if (shift > kF32MantissaBits + 1) return 0;  // below half the smallest subnormal
  return shift_right_rne(significand, shift);
}

// Decodes a sign-less code of a small float format without NaN/Inf codes to FP32 bits. Every
// value is exactly representable in FP32.
BUFFERLAB_HD constexpr uint32_t decode_small_magnitude(uint32_t code, int man_bits, int bias) {
  const uint32_t exp_field = code >> man_bits;
  const uint32_t mantissa = code & ((1u << man_bits) - 1u);
  if (exp_field != 0) {
    const uint32_t exp = exp_field + static_cast<uint32_t>(kF32Bias - bias);
    return (exp << kF32MantissaBits) | (mantissa << (kF32MantissaBits - man_bits));
  }
  if (mantissa == 0) return 0;
  // mantissa · 2^(1 - bias - man_bits): normalise the leading one into the implicit bit.
  int exp = 1 - bias - man_bits;
  uint32_t m = mantissa;
  while ((m & (1u << man_bits)) == 0) {
    m <<= 1;
    --exp;
  }
  const uint32_t frac = (m & ((1u << man_bits) - 1u)) << (kF32MantissaBits - man_bits);
  return (static_cast<uint32_t>(exp + man_bits + kF32Bias) << kF32MantissaBits) | frac;
}

// Encodes x into a saturating small float format `width` bits wide, the sign in its top bit:
// every NaN becomes nan_code; from max_finite up (where RNE would give max_finite or a code
// beyond it) the magnitude saturates to max_code, ±Inf included.
BUFFERLAB_HD constexpr uint8_t encode_saturating(float x, int width, int man_bits, int bias,
                                                 uint8_t nan_code, float max_finite,
                                                 uint8_t max_code) {
  const uint32_t bits = f32_bits(x);
  const uint32_t abs_bits = bits & kF32AbsMask;
  if (abs_bits > kF32InfBits) return nan_code;
  const uint8_t sign = static_cast<uint8_t>((bits >> (32 - width)) & (1u << (width - 1)));
  if (abs_bits >= f32_bits(max_finite)) return sign | max_code;
  return sign | static_cast<uint8_t>(encode_small_magnitude(abs_bits, man_bits, bias));
}

// Decodes the low `width` bits of b, a code of a small float format whose sign is its top bit
// and whose other codes all hold finite values, to FP32.
BUFFERLAB_HD constexpr float decode_signed(uint32_t b, int width, int man_bits, int bias) {
  const uint32_t sign_bit = 1u << (width - 1);
  const uint32_t sign = (b & sign_bit) << (32 - width);
  return f32_from_bits(sign | decode_small_magnitude(b & (sign_bit - 1u), man_bits, bias));
}

}  // namespace number_formats_detail

// ---- BF16: 1 sign, 8 exponent, 7 mantissa bits; the upper half of an FP32. ----

constexpr uint16_t kBf16CanonicalNan = 0x7FFF;

BUFFERLAB_HD constexpr uint16_t f32_to_bf16_bits(float x) {
  namespace d = number_formats_detail;
  const uint32_t bits = d::f32_bits(x);
  if ((bits & d::kF32AbsMask) > d::kF32InfBits) return kBf16CanonicalNan;
  // Rounding the whole pattern lets a carry reach the exponent; FLT_MAX rounds to Inf.
  return static_cast<uint16_t>(d::shift_right_rne(bits, 16));
}

BUFFERLAB_HD constexpr float bf16_bits_to_f32(uint16_t b) {
  return number_formats_detail::f32_from_bits(static_cast<uint32_t>(b) << 16);
}

// ---- FP8 E4M3 (fn): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no Inf; S.1111.111 = NaN. ----

constexpr uint8_t kE4m3CanonicalNan = 0x7F;
constexpr uint8_t kE4m3MaxFiniteBits = 0x7E;  // 448
constexpr float kE4m3MaxFinite = 448.0f;

BUFFERLAB_HD constexpr uint8_t f32_to_e4m3_bits(float x) {
  return number_formats_detail::encode_saturating(x, 8, 3, 7, kE4m3CanonicalNan, kE4m3MaxFinite,
                                                  kE4m3MaxFiniteBits);
}

BUFFERLAB_HD constexpr float e4m3_bits_to_f32(uint8_t b) {
  namespace d = number_formats_detail;
  // Both NaN codes decode to +NaN, as CUDA's decoder does.
  if ((b & 0x7Fu) == 0x7Fu) return d::f32_from_bits(d::kF32QuietNan);
  return d::decode_signed(b, 8, 3, 7);
}

// ---- FP4 E2M1: 1 sign, 2 exponent (bias 1), 1 mantissa bit; magnitudes 0 .5 1 1.5 2 3 4 6. ----

constexpr uint8_t kE2m1NanBits = 0x7;  // NaN has no code: CUDA maps it to +6
constexpr uint8_t kE2m1MaxFiniteBits = 0x7;
constexpr float kE2m1MaxFinite = 6.0f;

BUFFERLAB_HD constexpr uint8_t f32_to_e2m1_bits(float x) {
  return number_formats_detail::encode_saturating(x, 4, 1, 1, kE2m1NanBits, kE2m1MaxFinite,
                                                  kE2m1MaxFiniteBits);
}

// Reads the low nibble; the high nibble is ignored so packed bytes can be passed as they are.
BUFFERLAB_HD constexpr float e2m1_bits_to_f32(uint8_t b) {
  return number_formats_detail::decode_signed(b, 4, 1, 1);
}

// ---- Rounding helpers: the value a backend holds after storing x in the format. ----

BUFFERLAB_HD constexpr float round_to_bf16(float x) {
  return bf16_bits_to_f32(f32_to_bf16_bits(x));
}
BUFFERLAB_HD constexpr float round_to_e4m3(float x) {
  return e4m3_bits_to_f32(f32_to_e4m3_bits(x));
}
BUFFERLAB_HD constexpr float round_to_e2m1(float x) {
  return e2m1_bits_to_f32(f32_to_e2m1_bits(x));
}

// Number of representable BF16 values between a and b on the number line, counted across zero
// (+0 and -0 are the same point; the two smallest subnormals of opposite signs are 2 apart);
// ±Inf sits one step past the largest finite value. Any NaN gives UINT32_MAX so a NaN can never
// pass a ULP threshold.
BUFFERLAB_HD constexpr uint32_t bf16_ulp_distance(uint16_t a, uint16_t b) {
  if ((a & 0x7FFFu) > 0x7F80u || (b & 0x7FFFu) > 0x7F80u) return UINT32_MAX;
  // Sign-magnitude to a monotone integer line: negative values mirror below zero.
  const int32_t line_a = (a & 0x8000u) != 0 ? -(a & 0x7FFF) : (a & 0x7FFF);
  const int32_t line_b = (b & 0x8000u) != 0 ? -(b & 0x7FFF) : (b & 0x7FFF);
  const int32_t diff = line_a - line_b;
  return static_cast<uint32_t>(diff < 0 ? -diff : diff);
}

}  // namespace bufferlab
