// Small helpers shared by the mHC kernel test bodies (mhc_pre_kernel_tests.cpp,
// mhc_post_kernel_tests.cpp, mhc_lowrank_kernel_tests.cpp): the mHC config (mhc_config.h),
// bit comparisons of token ranges, BF16 NaN, FP32 NaN / Inf, report expectations
// (report_checks.h), and the seeded Sinkhorn-form inputs (streams in [-1, 1), fn in ±√(3/K) so
// each mix value has unit variance, moderate biases) as the oracle's input structs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/compare.h"
#include "bufferlab/oracle/mhc.h"
#include "mhc_config.h"
#include "report_checks.h"
#include "seeded_values.h"

namespace bufferlab::testing {

inline float bf16_float(uint16_t b) { return bf16_bits_to_f32(b); }
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline bool bf16_nan(uint16_t b) { return (b & 0x7FFFu) > 0x7F80u; }

// Elements [begin, end) of a and b hold the same bits.
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b, uint64_t begin, uint64_t end) {
  return std::memcmp(a.data() + begin, b.data() + begin, (end - begin) * sizeof(T)) == 0;
}

// Per-element sum of two bound vectors (a backend's and the CPU's, each against the faithful
// oracle on the same inputs: the two backends differ by at most the sum).
inline std::vector<double> sum(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> s(a.size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = a[i] + b[i];
  return s;
}

// The CPU kernels' first-order error terms (the tight bounds of mhc_pre_kernel_tests.cpp and
// mhc_lowrank_kernel_tests.cpp): FP32 (u = 2^-24) and BF16 (u8 = 2^-8) unit roundoffs, 1.01
// for the products of first-order terms, γ_n of the FP32 roundoff, and the FP32 σ = 1/(1 + e^-z)
// error: expf within 1 ULP, the add and the division leave ≤ 4uσ; σ' ≤ 1/4 carries dz.
namespace cpu_roundoff {
constexpr double kU = 0x1p-24;
constexpr double kU8 = 0x1p-8;
constexpr double kSecondOrder = 1.01;

inline double gamma_u(double n) { return n * kU / (1.0 - n * kU); }
inline double sigma(double z) { return 1.0 / (1.0 + std::exp(-z)); }
inline double sigmoid_error(double z, double dz) { return 0.25 * dz + 4 * kU * sigma(z); }
}  // namespace cpu_roundoff

// Pre step inputs: x [rows, hc, h] in [-1, 1), fn [mix_rows, K] in ±√(3/K), the first `scales`
// of {0.8, 1.1, 1.5}, bias [mix_rows] in ±0.5.
inline oracle::MhcPreInputs seeded_pre_inputs(uint64_t rows, uint64_t hc, uint64_t h,
                                              uint64_t mix_rows, uint64_t seed,
                                              uint64_t scales = 3) {
  const uint64_t K = hc * h;
  oracle::MhcPreInputs in;
  in.streams = seeded_values(rows * K, seed, 1.0f);
  in.fn = seeded_values(mix_rows * K, seed + 1,
                        static_cast<float>(std::sqrt(3.0 / static_cast<double>(K))));
  in.scale = std::vector<float>{0.8f, 1.1f, 1.5f};
  in.scale.resize(scales);
  in.bias = seeded_values(mix_rows, seed + 2, 0.5f);
  return in;
}

// The head's inputs of the same seed: fn [hc, K], scale {s0}, bias [hc] (the first hc values
// of the pre step's bias of that seed).
inline oracle::MhcHeadInputs seeded_head_inputs(uint64_t rows, uint64_t hc, uint64_t h,
                                                uint64_t seed, float s0 = 0.8f) {
  const oracle::MhcPreInputs p = seeded_pre_inputs(rows, hc, h, hc, seed, 1);
  return {p.streams, p.fn, {s0}, p.bias};
}

}  // namespace bufferlab::testing
