// Helpers shared by the oracle sources (private to oracle/src): one copy of each small
// function and bound term the references, bounds, inputs and judges of several families use,
// so no file keeps its own (and a unity batch sees each name once). The checked product `mul`
// is core's (bufferlab/core/checked.h); the BF16 store bound stored_bf16 is public (bounds.h).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/compare.h"
#include "bufferlab/oracle/seeded_random.h"

namespace bufferlab::oracle {

// --- host copies ----------------------------------------------------------------------------

// Error naming the op (its params()) when a host copy does not hold the elements it needs.
inline void require_size(const std::string& params, const char* what, uint64_t got, uint64_t want) {
  if (got != want)
    throw Error(fmt::format("{}: {} holds {} elements, the op needs {}", params, what, got, want));
}

template <class T>
void append(std::vector<T>& to, const std::vector<T>& part) {
  to.insert(to.end(), part.begin(), part.end());
}

// The generator of one input tensor of a seed: each tensor draws from its own stream (an
// enumerator of the family's stream enum), so adding a tensor never shifts another.
template <class Stream>
SplitMix64 rng_for(uint64_t seed, Stream s) {
  return SplitMix64(seed * 0x100000001B3ull + static_cast<uint64_t>(s));
}

// --- BF16 values ----------------------------------------------------------------------------

inline double bf16_value(uint16_t bits) { return bf16_bits_to_f32(bits); }
// The BF16 bits of v through FP32 (round to nearest even twice).
inline uint16_t bf16_of(double v) { return f32_to_bf16_bits(static_cast<float>(v)); }
// Each element rounded to BF16 (the faithful reference's stores).
inline std::vector<double> rounded_bf16(std::vector<double> v) {
  for (double& x : v) x = round_bf16(x);
  return v;
}
// BF16 bits of values rounded to BF16 (round_bf16 first: no double rounding through FP32).
inline std::vector<uint16_t> to_bf16_bits(const std::vector<double>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = f32_to_bf16_bits(static_cast<float>(round_bf16(v[i])));
  return out;
}
inline std::vector<float> to_f32(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// --- elementary functions in FP64 ---------------------------------------------------------

inline double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }
inline double silu(double z) { return z / (1.0 + std::exp(-z)); }
inline double dot(const double* a, const double* b, uint64_t n) {
  double s = 0.0;
  for (uint64_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}

// --- bound terms (derivations in the *_bounds.cpp that use them) ----------------------------

inline constexpr double kU64 = kFp64UnitRoundoff;  // the oracle's own FP64 unit roundoff
inline constexpr double kSigmoidAbs = 0x1p-126;    // σ below FLT_MIN (expf overflow) or flushed
inline constexpr double kSiluAbs = 0x1p-120;
inline constexpr double kSiluLipschitz = 1.1;  // sup |silu'(z)| = 1.0998... (at z ≈ 2.40)

// Relative error of the FP32 silu(g) = g / (1 + expf(−g)) (or g · (1 / (1 + expf(−g)))):
// expf errs by exp_ulps FP32 ULPs ≤ 2·exp_ulps·u relative; 1 + ê keeps that relative error
// (ê ≥ 0: |ê − e| ≤ c·e ≤ c·(1 + e)) and adds one rounding; the division (or reciprocal and
// product) at most two: k = 2·exp_ulps + 3 factors (1 + δ).
inline double silu_rel(const BoundModel& bm) { return gamma(2.0 * bm.exp_ulps + 3.0, bm.fp32_u); }
// The dot-product error of a backend accumulating K terms with roundoff u, plus the oracle's
// FP64 one, given Σ|terms|; one underflow rounding per term (bounds.h).
inline double dot_error(double abs_sum, uint64_t K, double u) {
  const double k = static_cast<double>(K);
  return (gamma(k, u) + gamma(k, kU64)) * abs_sum + k * kUnderflowPerOp;
}

// --- judges ---------------------------------------------------------------------------------

// Names the first bad element's coordinates (token, head, dim, ...) in its reason.
using Where = std::function<std::string(uint64_t row, uint64_t col)>;
inline TensorComparison located(TensorComparison c, const Where& where) {
  if (c.first_bad) c.first_bad->reason += " at (" + where(c.first_bad->row, c.first_bad->col) + ")";
  return c;
}

// An FP32 property check (no reference values): failures are added by the caller.
inline TensorComparison property(std::string name, uint64_t rows, uint64_t cols,
                                 std::string formula) {
  TensorComparison c;
  c.name = std::move(name);
  c.dtype = "f32";
  c.rows = rows;
  c.cols = cols;
  c.tol.formula = std::move(formula);
  return c;
}

}  // namespace bufferlab::oracle
