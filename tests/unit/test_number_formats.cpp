// Unit tests of the core number formats (docs/spec/numerics.md §0) against values written out from
// the format definitions, an independent nearest-value search, and code round trips. CUDA's own
// conversions are compared in tests/format_xcheck and tests/slow.
#include "bufferlab/core/number_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using bufferlab::bf16_bits_to_f32;
using bufferlab::bf16_ulp_distance;
using bufferlab::e2m1_bits_to_f32;
using bufferlab::e4m3_bits_to_f32;
using bufferlab::f32_to_bf16_bits;
using bufferlab::f32_to_e2m1_bits;
using bufferlab::f32_to_e4m3_bits;

float f32(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// The codecs are constexpr: usable in static tables and checked at compile time here.
static_assert(f32_to_bf16_bits(1.0f) == 0x3F80);
static_assert(f32_to_e4m3_bits(-448.0f) == 0xFE);
static_assert(f32_to_e2m1_bits(0.75f) == 0x2);
static_assert(e4m3_bits_to_f32(0x01) == 0x1p-9f);
static_assert(e2m1_bits_to_f32(0xF) == -6.0f);

// ---------------------------------------------------------------- format definitions (FP64)

// Value of a sign-less code of a binary float format with an IEEE-like layout, from the
// textbook definition: subnormal m·2^(1-bias-man), normal (1 + m/2^man)·2^(e-bias).
double definition_value(uint32_t code, int man_bits, int bias) {
  const uint32_t e = code >> man_bits;
  const uint32_t m = code & ((1u << man_bits) - 1u);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - bias - man_bits);
  return std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -man_bits),
                    static_cast<int>(e) - bias);
}

double e4m3_definition(uint8_t c) {
  const double mag = definition_value(c & 0x7Fu, 3, 7);
  return (c & 0x80u) != 0 ? -mag : mag;
}

double e2m1_definition(uint8_t c) {
  const double mag = definition_value(c & 0x7u, 1, 1);
  return (c & 0x8u) != 0 ? -mag : mag;
}

// Nearest code by exhaustive search over the finite codes, ties to the even code, saturating:
// an encoder written from "round to nearest even" with no bit tricks.
template <typename Decode>
uint32_t nearest_code_search(float x, uint32_t sign_bit, Decode decode) {
  const double v = std::fabs(static_cast<double>(x));
  uint32_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (uint32_t c = 0; c < sign_bit; ++c) {
    const double d = decode(c);
    if (std::isnan(d)) continue;
    const double err = std::fabs(d - v);
    if (err < best_err || (err == best_err && (c & 1u) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return std::signbit(x) ? (best | sign_bit) : best;
}

// ---------------------------------------------------------------- BF16

TEST(Bf16, ExactValues) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16_bits(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16_bits(kInf), 0x7F80);
  EXPECT_EQ(f32_to_bf16_bits(-kInf), 0xFF80);
  EXPECT_EQ(f32_to_bf16_bits(f32(0x80010000u)), 0x8001);  // smallest subnormal, exact
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16_bits(f32(0x3F808000u)), 0x3F80);  // 1 + 2^-8: tie, down to even
  EXPECT_EQ(f32_to_bf16_bits(f32(0x3F818000u)), 0x3F82);  // 1 + 3·2^-8: tie, up to even
  EXPECT_EQ(f32_to_bf16_bits(f32(0x3F808001u)), 0x3F81);  // just above the tie
  EXPECT_EQ(f32_to_bf16_bits(f32(0x3F807FFFu)), 0x3F80);  // just below the tie
  EXPECT_EQ(f32_to_bf16_bits(f32(0xBF818000u)), 0xBF82);  // negative ties mirror
  EXPECT_EQ(f32_to_bf16_bits(f32(0x3FFF8000u)), 0x4000);  // mantissa carry into the exponent
}

TEST(Bf16, OverflowsToInfinityAtTheRoundingBoundary) {
  EXPECT_EQ(f32_to_bf16_bits(f32(0x7F7F0000u)), 0x7F7F);  // max finite BF16, exact
  EXPECT_EQ(f32_to_bf16_bits(f32(0x7F7F7FFFu)), 0x7F7F);  // below the midpoint to "2^128"
  EXPECT_EQ(f32_to_bf16_bits(f32(0x7F7F8000u)), 0x7F80);  // the midpoint: odd 0x7F7F goes up
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(f32_to_bf16_bits(-std::numeric_limits<float>::max()), 0xFF80);
}

TEST(Bf16, Fp32SubnormalsRound) {
  EXPECT_EQ(f32_to_bf16_bits(f32(0x00000001u)), 0x0000);
  EXPECT_EQ(f32_to_bf16_bits(f32(0x00008000u)), 0x0000);  // tie to even zero
  EXPECT_EQ(f32_to_bf16_bits(f32(0x00018000u)), 0x0002);  // tie to even 2
  EXPECT_EQ(f32_to_bf16_bits(f32(0x80008001u)), 0x8001);
  EXPECT_EQ(f32_to_bf16_bits(f32(0x007FFFFFu)), 0x0080);  // rounds up to the smallest normal
}

TEST(Bf16, EveryNanBecomesTheCanonicalPositiveNan) {
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu,
                       0x7FA00000u, 0x7F80FFFFu}) {
    EXPECT_EQ(f32_to_bf16_bits(f32(nan)), bufferlab::kBf16CanonicalNan) << std::hex << nan;
  }
  EXPECT_EQ(bufferlab::kBf16CanonicalNan, 0x7FFF);
}

TEST(Bf16, DecodeMatchesTheDefinitionForEveryCode) {
  for (uint32_t c = 0; c <= 0xFFFF; ++c) {
    const auto code = static_cast<uint16_t>(c);
    const float x = bf16_bits_to_f32(code);
    if ((c & 0x7FFFu) > 0x7F80u) {
      EXPECT_TRUE(std::isnan(x)) << std::hex << c;
      continue;
    }
    if ((c & 0x7FFFu) == 0x7F80u) {
      EXPECT_EQ(x, (c & 0x8000u) != 0 ? -kInf : kInf);
      continue;
    }
    const double mag = definition_value(c & 0x7FFFu, 7, 127);
    EXPECT_EQ(static_cast<double>(x), (c & 0x8000u) != 0 ? -mag : mag) << std::hex << c;
    EXPECT_EQ(std::signbit(x), (c & 0x8000u) != 0) << std::hex << c;
  }
}

TEST(Bf16, EveryCodeRoundTrips) {
  for (uint32_t c = 0; c <= 0xFFFF; ++c) {
    const auto code = static_cast<uint16_t>(c);
    const bool nan = (c & 0x7FFFu) > 0x7F80u;
    EXPECT_EQ(f32_to_bf16_bits(bf16_bits_to_f32(code)), nan ? 0x7FFF : code) << std::hex << c;
  }
}

// BF16 neighbours of x are its truncation and the next code up; pick the nearer in FP64.
TEST(Bf16, MatchesNearestNeighbourChoiceOnRandomInputs) {
  std::mt19937 rng(20240611u);
  for (int i = 0; i < 200000; ++i) {
    const float x = f32(static_cast<uint32_t>(rng()));
    if (!std::isfinite(x)) continue;
    const auto lo = static_cast<uint16_t>(bits_of(x) >> 16);
    const auto hi = static_cast<uint16_t>(lo + 1);
    const double d_lo = std::fabs(static_cast<double>(x) - bf16_bits_to_f32(lo));
    const double hi_value = (hi & 0x7FFFu) == 0x7F80u
                                ? std::copysign(std::ldexp(1.0, 128), static_cast<double>(x))
                                : static_cast<double>(bf16_bits_to_f32(hi));
    const double d_hi = std::fabs(static_cast<double>(x) - hi_value);
    const uint16_t expected = d_lo < d_hi || (d_lo == d_hi && (lo & 1u) == 0) ? lo : hi;
    ASSERT_EQ(f32_to_bf16_bits(x), expected) << std::hex << bits_of(x);
  }
}

TEST(Bf16, RoundHelperIsDecodeOfEncode) {
  EXPECT_EQ(bufferlab::round_to_bf16(f32(0x3F808001u)), bf16_bits_to_f32(0x3F81));
  EXPECT_EQ(bufferlab::round_to_bf16(3.14159265f), 3.140625f);
  EXPECT_TRUE(std::isnan(bufferlab::round_to_bf16(-kNan)));
}

TEST(Bf16UlpDistance, CountsRepresentableStepsAcrossZero) {
  EXPECT_EQ(bf16_ulp_distance(0x3F80, 0x3F80), 0u);
  EXPECT_EQ(bf16_ulp_distance(0x3F80, 0x3F81), 1u);
  EXPECT_EQ(bf16_ulp_distance(0x3F81, 0x3F80), 1u);
  EXPECT_EQ(bf16_ulp_distance(0x3F7F, 0x3F80), 1u);  // across an exponent boundary
  EXPECT_EQ(bf16_ulp_distance(0x0000, 0x8000), 0u);  // +0 and -0 are one point
  EXPECT_EQ(bf16_ulp_distance(0x0001, 0x8001), 2u);  // ±smallest subnormal, via zero
  EXPECT_EQ(bf16_ulp_distance(0x0001, 0x8000), 1u);
  EXPECT_EQ(bf16_ulp_distance(0x3F80, 0xBF80), 2u * 0x3F80);
  EXPECT_EQ(bf16_ulp_distance(0x7F7F, 0x7F80), 1u);  // max finite to Inf
  EXPECT_EQ(bf16_ulp_distance(0xFF80, 0x7F80), 2u * 0x7F80);
}

TEST(Bf16UlpDistance, AnyNanIsInfinitelyFar) {
  EXPECT_EQ(bf16_ulp_distance(0x7FC0, 0x3F80), UINT32_MAX);
  EXPECT_EQ(bf16_ulp_distance(0x3F80, 0xFFC1), UINT32_MAX);
  EXPECT_EQ(bf16_ulp_distance(0x7FFF, 0x7FFF), UINT32_MAX);  // NaN never equals itself
  EXPECT_EQ(bf16_ulp_distance(0x7F81, 0x7F80), UINT32_MAX);
}

TEST(Bf16UlpDistance, NeighbouringCodesAreOneApartAndOrderedByValue) {
  for (uint32_t c = 0; c < 0x7F80; ++c) {
    const auto a = static_cast<uint16_t>(c);
    ASSERT_EQ(bf16_ulp_distance(a, static_cast<uint16_t>(c + 1)), 1u) << std::hex << c;
    ASSERT_EQ(bf16_ulp_distance(a | 0x8000, static_cast<uint16_t>((c + 1) | 0x8000)), 1u);
    ASSERT_LT(bf16_bits_to_f32(a), bf16_bits_to_f32(static_cast<uint16_t>(c + 1)));
  }
}

// ---------------------------------------------------------------- FP8 E4M3 (fn)

TEST(E4m3, ExactValues) {
  EXPECT_EQ(f32_to_e4m3_bits(1.0f), 0x38);
  EXPECT_EQ(f32_to_e4m3_bits(-1.0f), 0xB8);
  EXPECT_EQ(f32_to_e4m3_bits(240.0f), 0x77);
  EXPECT_EQ(f32_to_e4m3_bits(256.0f), 0x78);
  EXPECT_EQ(f32_to_e4m3_bits(448.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3_bits(0x1p-6f), 0x08);      // smallest normal
  EXPECT_EQ(f32_to_e4m3_bits(0x1p-9f), 0x01);      // smallest subnormal
  EXPECT_EQ(f32_to_e4m3_bits(7 * 0x1p-9f), 0x07);  // largest subnormal
  EXPECT_EQ(f32_to_e4m3_bits(0.0f), 0x00);
  EXPECT_EQ(f32_to_e4m3_bits(-0.0f), 0x80);
}

TEST(E4m3, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_e4m3_bits(1.0625f), 0x38);           // 1 + 1/16: tie, down to even
  EXPECT_EQ(f32_to_e4m3_bits(1.1875f), 0x3A);           // 1 + 3/16: tie, up to even 1.25
  EXPECT_EQ(f32_to_e4m3_bits(1.0626f), 0x39);           // above the tie
  EXPECT_EQ(f32_to_e4m3_bits(432.0f), 0x7E);            // tie 416|448, to even 448
  EXPECT_EQ(f32_to_e4m3_bits(424.0f), 0x7D);            // 416
  EXPECT_EQ(f32_to_e4m3_bits(15 * 0x1p-10f), 0x08);     // 7.5 subnormal units: carry to normal
  EXPECT_EQ(f32_to_e4m3_bits(3 * 0x1p-10f), 0x02);      // 1.5 units: tie to even 2
  EXPECT_EQ(f32_to_e4m3_bits(0x1p-10f), 0x00);          // half the smallest subnormal: to 0
  EXPECT_EQ(f32_to_e4m3_bits(f32(0x3A800001u)), 0x01);  // just above it
  EXPECT_EQ(f32_to_e4m3_bits(-0x1p-10f), 0x80);         // underflow keeps the sign
  EXPECT_EQ(f32_to_e4m3_bits(f32(0x00000001u)), 0x00);  // FP32 subnormals vanish
  EXPECT_EQ(f32_to_e4m3_bits(f32(0x80000001u)), 0x80);
}

TEST(E4m3, SaturatesToMaxFinite) {
  for (float x : {449.0f, 463.9f, 464.0f, 480.0f, 1e9f, std::numeric_limits<float>::max(), kInf}) {
    EXPECT_EQ(f32_to_e4m3_bits(x), 0x7E) << x;
    EXPECT_EQ(f32_to_e4m3_bits(-x), 0xFE) << x;
  }
}

TEST(E4m3, EveryNanBecomesTheCanonicalNan) {
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0xFFFFFFFFu}) {
    EXPECT_EQ(f32_to_e4m3_bits(f32(nan)), 0x7F) << std::hex << nan;
  }
  EXPECT_TRUE(std::isnan(e4m3_bits_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_bits_to_f32(0xFF)));
  EXPECT_FALSE(std::signbit(e4m3_bits_to_f32(0xFF)));  // CUDA's decoder drops the sign too
}

TEST(E4m3, DecodeMatchesTheDefinitionForEveryCode) {
  for (uint32_t c = 0; c <= 0xFF; ++c) {
    if ((c & 0x7Fu) == 0x7Fu) continue;
    const auto code = static_cast<uint8_t>(c);
    EXPECT_EQ(static_cast<double>(e4m3_bits_to_f32(code)), e4m3_definition(code)) << c;
    EXPECT_EQ(std::signbit(e4m3_bits_to_f32(code)), (c & 0x80u) != 0) << c;
  }
  EXPECT_EQ(e4m3_bits_to_f32(0x7E), 448.0f);
}

TEST(E4m3, EveryCodeRoundTrips) {
  for (uint32_t c = 0; c <= 0xFF; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const bool nan = (c & 0x7Fu) == 0x7Fu;
    EXPECT_EQ(f32_to_e4m3_bits(e4m3_bits_to_f32(code)), nan ? 0x7F : code) << c;
  }
}

// Inputs cover every code's neighbourhood (midpoints ± a few FP32 ULPs) plus random magnitudes.
TEST(E4m3, MatchesExhaustiveNearestSearch) {
  std::vector<float> inputs;
  for (uint32_t c = 0; c < 0x7E; ++c) {
    const double mid =
        (e4m3_definition(static_cast<uint8_t>(c)) + e4m3_definition(static_cast<uint8_t>(c + 1))) /
        2;
    for (int ulps = -2; ulps <= 2; ++ulps) inputs.push_back(f32(bits_of(float(mid)) + ulps));
  }
  std::mt19937 rng(7u);
  std::uniform_real_distribution<float> log2_mag(-12.0f, 9.5f);
  for (int i = 0; i < 20000; ++i) inputs.push_back(std::exp2(log2_mag(rng)));
  const auto decode = [](uint32_t c) {
    return c == 0x7F ? std::nan("") : e4m3_definition(static_cast<uint8_t>(c));
  };
  for (float x : inputs) {
    for (float s : {x, -x}) {
      ASSERT_EQ(f32_to_e4m3_bits(s), nearest_code_search(s, 0x80, decode)) << s;
    }
  }
}

// ---------------------------------------------------------------- FP4 E2M1

TEST(E2m1, EveryCodeHasTheSpecifiedMagnitude) {
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t c = 0; c < 8; ++c) {
    EXPECT_EQ(e2m1_bits_to_f32(c), magnitudes[c]);
    EXPECT_EQ(e2m1_bits_to_f32(c | 0x8), -magnitudes[c]);
    EXPECT_EQ(e2m1_definition(c), magnitudes[c]);
    EXPECT_EQ(f32_to_e2m1_bits(magnitudes[c]), c);
    EXPECT_EQ(f32_to_e2m1_bits(-magnitudes[c]), c | 0x8);
  }
  EXPECT_TRUE(std::signbit(e2m1_bits_to_f32(0x8)));
}

TEST(E2m1, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_e2m1_bits(0.25f), 0x0);  // tie 0|0.5 → 0
  EXPECT_EQ(f32_to_e2m1_bits(0.26f), 0x1);
  EXPECT_EQ(f32_to_e2m1_bits(0.75f), 0x2);  // tie 0.5|1 → 1.0 (even code)
  EXPECT_EQ(f32_to_e2m1_bits(1.25f), 0x2);  // tie 1|1.5 → 1.0
  EXPECT_EQ(f32_to_e2m1_bits(1.75f), 0x4);  // tie 1.5|2 → 2.0
  EXPECT_EQ(f32_to_e2m1_bits(2.5f), 0x4);   // tie 2|3 → 2.0
  EXPECT_EQ(f32_to_e2m1_bits(3.5f), 0x6);   // tie 3|4 → 4.0
  EXPECT_EQ(f32_to_e2m1_bits(5.0f), 0x6);   // tie 4|6 → 4.0
  EXPECT_EQ(f32_to_e2m1_bits(5.0001f), 0x7);
  EXPECT_EQ(f32_to_e2m1_bits(-0.75f), 0xA);
  EXPECT_EQ(f32_to_e2m1_bits(-0.1f), 0x8);  // underflow keeps the sign
  EXPECT_EQ(f32_to_e2m1_bits(-0.0f), 0x8);
  EXPECT_EQ(f32_to_e2m1_bits(f32(0x00000001u)), 0x0);
}

TEST(E2m1, SaturatesAndMapsNanToPlusSix) {
  for (float x : {6.0f, 6.5f, 7.0f, 1e30f, kInf}) {
    EXPECT_EQ(f32_to_e2m1_bits(x), 0x7) << x;
    EXPECT_EQ(f32_to_e2m1_bits(-x), 0xF) << x;
  }
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu}) {
    EXPECT_EQ(f32_to_e2m1_bits(f32(nan)), 0x7) << std::hex << nan;
  }
}

TEST(E2m1, DecodeReadsTheLowNibbleOnly) {
  for (uint32_t byte = 0; byte <= 0xFF; ++byte) {
    const auto b = static_cast<uint8_t>(byte);
    EXPECT_EQ(bits_of(e2m1_bits_to_f32(b)), bits_of(e2m1_bits_to_f32(b & 0xF))) << byte;
  }
}

TEST(E2m1, EveryCodeRoundTrips) {
  for (uint8_t c = 0; c < 16; ++c) EXPECT_EQ(f32_to_e2m1_bits(e2m1_bits_to_f32(c)), c);
}

TEST(E2m1, MatchesExhaustiveNearestSearch) {
  std::mt19937 rng(11u);
  std::uniform_real_distribution<float> mag(0.0f, 8.0f);
  const auto decode = [](uint32_t c) { return e2m1_definition(static_cast<uint8_t>(c)); };
  for (int i = 0; i < 50000; ++i) {
    const float x = i % 2 == 0 ? mag(rng) : -mag(rng);
    ASSERT_EQ(f32_to_e2m1_bits(x), nearest_code_search(x, 0x8, decode)) << x;
  }
}

TEST(RoundHelpers, AreDecodeOfEncode) {
  EXPECT_EQ(bufferlab::round_to_e4m3(500.0f), 448.0f);
  EXPECT_EQ(bufferlab::round_to_e4m3(0.3f), 0.3125f);
  EXPECT_EQ(bufferlab::round_to_e2m1(2.6f), 3.0f);
  EXPECT_EQ(bufferlab::round_to_e2m1(kNan), 6.0f);
  EXPECT_TRUE(std::isnan(bufferlab::round_to_e4m3(kNan)));
}

}  // namespace
