// Sampled cross-check of the core number formats against CUDA's host-side conversions
// (docs/spec/numerics.md §0), bit for bit: every rounding boundary of each format, all FP32
// subnormals, specials and NaN payloads, and a few million random FP32 patterns; the decoders on
// every code. Runs in CI in a few seconds; tests/slow sweeps all 2^32 inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "bufferlab/core/number_formats.h"
#include "format_reference_pairs.h"

namespace {

using namespace bufferlab::testing;

struct Conversion {
  const char* name;
  uint32_t (*ours)(float);
  uint32_t (*cuda)(float);
};

constexpr Conversion kConversions[] = {
    {"bf16", ours_bf16, cuda_bf16},
    {"e4m3", ours_e4m3, cuda_e4m3},
    {"e2m1", ours_e2m1, cuda_e2m1},
};

// Runs every conversion on every input; reports the mismatch count and the first mismatch.
void expect_all_conversions_agree(const std::vector<uint32_t>& inputs, const char* what) {
  for (const Conversion& c : kConversions) {
    uint64_t mismatches = 0;
    for (uint32_t bits : inputs) {
      const float x = f32_from_bits(bits);
      const uint32_t ours = c.ours(x);
      const uint32_t cuda = c.cuda(x);
      if (ours == cuda) continue;
      if (mismatches++ == 0) {
        ADD_FAILURE() << c.name << " on " << what << ": input 0x" << std::hex << bits << " (" << x
                      << "): ours 0x" << ours << ", CUDA 0x" << cuda;
      }
    }
    EXPECT_EQ(mismatches, 0u) << c.name << " on " << what << " (" << inputs.size() << " inputs)";
  }
}

// Positive finite values of each format in increasing order (from the project's decoders,
// which the unit tests check against the format definitions; here they only place inputs).
std::vector<double> bf16_values() {
  std::vector<double> v;
  for (uint32_t c = 0; c < 0x7F80; ++c)
    v.push_back(bufferlab::bf16_bits_to_f32(static_cast<uint16_t>(c)));
  return v;
}

std::vector<double> e4m3_values() {
  std::vector<double> v;
  for (uint32_t c = 0; c <= 0x7E; ++c)
    v.push_back(bufferlab::e4m3_bits_to_f32(static_cast<uint8_t>(c)));
  return v;
}

std::vector<double> e2m1_values() {
  std::vector<double> v;
  for (uint32_t c = 0; c <= 0x7; ++c)
    v.push_back(bufferlab::e2m1_bits_to_f32(static_cast<uint8_t>(c)));
  return v;
}

// Every value, every midpoint between neighbours and the midpoint past the largest value (where
// rounding would leave the finite range), each ±2 FP32 ULPs, with both signs. Midpoints of these
// formats are exact in FP32.
void add_boundaries(const std::vector<double>& values, std::vector<uint32_t>& out) {
  std::vector<double> points = values;
  for (size_t i = 0; i + 1 < values.size(); ++i) points.push_back((values[i] + values[i + 1]) / 2);
  const double top = values.back();
  points.push_back(top + (top - values[values.size() - 2]) / 2);
  for (double p : points) {
    ASSERT_EQ(static_cast<double>(static_cast<float>(p)), p) << "boundary not exact in FP32";
    const uint32_t b = bits_of(static_cast<float>(p));
    for (int d = -2; d <= 2; ++d) {
      const uint32_t near = b + static_cast<uint32_t>(d);
      if (d < 0 && b < static_cast<uint32_t>(-d)) continue;  // below +0: covered by the sign flip
      out.push_back(near);
      out.push_back(near | 0x80000000u);
    }
  }
}

TEST(FormatXcheckSampled, RoundingBoundariesOfEveryFormat) {
  std::vector<uint32_t> inputs;
  add_boundaries(bf16_values(), inputs);
  add_boundaries(e4m3_values(), inputs);
  add_boundaries(e2m1_values(), inputs);
  expect_all_conversions_agree(inputs, "rounding boundaries");
}

TEST(FormatXcheckSampled, AllFp32Subnormals) {
  std::vector<uint32_t> inputs;
  for (uint32_t m = 1; m < 0x800000u; ++m) {
    inputs.push_back(m);
    inputs.push_back(m | 0x80000000u);
  }
  expect_all_conversions_agree(inputs, "FP32 subnormals");
}

TEST(FormatXcheckSampled, ZerosInfinitiesAndNanPayloads) {
  std::vector<uint32_t> inputs = {0x00000000u, 0x7F800000u, 0x7F7FFFFFu, 0x00800000u};
  for (uint32_t nan : {0x7F800001u, 0x7F800002u, 0x7F800100u, 0x7FA00000u, 0x7FBFFFFFu, 0x7FC00000u,
                       0x7FC00001u, 0x7FD55555u, 0x7FFF0000u, 0x7FFFFFFFu}) {
    inputs.push_back(nan);
  }
  const size_t n = inputs.size();
  for (size_t i = 0; i < n; ++i) inputs.push_back(inputs[i] | 0x80000000u);
  expect_all_conversions_agree(inputs, "specials");
}

TEST(FormatXcheckSampled, RandomFp32BitPatterns) {
  constexpr uint32_t kSeed = 0x5EED0001u;
  constexpr size_t kCount = size_t{1} << 22;
  std::printf("[ random   ] %zu FP32 bit patterns from mt19937 seed 0x%X\n", kCount, kSeed);
  std::mt19937 rng(kSeed);
  std::vector<uint32_t> inputs(kCount);
  for (auto& b : inputs) b = static_cast<uint32_t>(rng());
  expect_all_conversions_agree(inputs, "random bit patterns");
}

// Random magnitudes where the narrow formats have codes, so most inputs land between codes
// rather than in the saturated or underflowed tails that random bit patterns mostly hit.
TEST(FormatXcheckSampled, RandomValuesInsideTheNarrowRanges) {
  constexpr uint32_t kSeed = 0x5EED0002u;
  std::printf("[ random   ] 2^20 log-uniform values in [2^-12, 2^10) from seed 0x%X\n", kSeed);
  std::mt19937 rng(kSeed);
  std::uniform_real_distribution<float> log2_mag(-12.0f, 10.0f);
  std::vector<uint32_t> inputs;
  for (int i = 0; i < (1 << 20); ++i) {
    const uint32_t b = bits_of(std::exp2(log2_mag(rng)));
    inputs.push_back((rng() & 1u) != 0 ? b | 0x80000000u : b);
  }
  expect_all_conversions_agree(inputs, "random narrow-range values");
}

// ---- decoders, on every code ----

// CUDA decodes the narrow formats to half precision; every such value is exact in FP32.
float cuda_e4m3_to_f32(uint8_t c) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, __NV_E4M3)));
}
float cuda_e2m1_to_f32(uint8_t c) {
  return __half2float(__half(__nv_cvt_fp4_to_halfraw(c, __NV_E2M1)));
}

// Same bits for numbers; for NaN both must be NaN with the same sign (payloads differ).
void expect_same_decode(float ours, float cuda, uint32_t code, const char* format) {
  if (std::isnan(cuda)) {
    EXPECT_TRUE(std::isnan(ours)) << format << " code 0x" << std::hex << code;
    EXPECT_EQ(std::signbit(ours), std::signbit(cuda)) << format << " code 0x" << std::hex << code;
    return;
  }
  EXPECT_EQ(bits_of(ours), bits_of(cuda)) << format << " code 0x" << std::hex << code;
}

TEST(FormatXcheckSampled, DecodersOnEveryCode) {
  for (uint32_t c = 0; c <= 0xFFFF; ++c) {
    const auto code = static_cast<uint16_t>(c);
    // BF16 widening keeps NaN payloads, so every code compares bit for bit.
    EXPECT_EQ(bits_of(bufferlab::bf16_bits_to_f32(code)),
              bits_of(__bfloat162float(__ushort_as_bfloat16(code))))
        << "bf16 code 0x" << std::hex << c;
  }
  for (uint32_t c = 0; c <= 0xFF; ++c) {
    const auto code = static_cast<uint8_t>(c);
    expect_same_decode(bufferlab::e4m3_bits_to_f32(code), cuda_e4m3_to_f32(code), c, "e4m3");
  }
  for (uint32_t c = 0; c <= 0xF; ++c) {
    const auto code = static_cast<uint8_t>(c);
    expect_same_decode(bufferlab::e2m1_bits_to_f32(code), cuda_e2m1_to_f32(code), c, "e2m1");
  }
}

}  // namespace
