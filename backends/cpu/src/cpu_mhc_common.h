// Shared pieces of the CPU mHC kernels (ops/mhc.h, docs/spec/numerics.md §3–§4): the hc limit,
// the finiteness check and power-of-two scale of a token's streams, the scaled RMS, the
// scaled mix GEMV, sigmoid, and the NaN fills of a non-finite token. Private to the CPU
// backend; FP32 arithmetic throughout (the FP64 side is the oracle).
//
// Huge streams (ops/mhc.h): a vector with max|x| = m·2^e (m in [0.5, 1)) is read as
// x̂ = x·2^-max(e, 0), which is exact (2^-e is representable down to 2^-149), so x̂ ∈ (-1, 1)
// when e > 0. Then rs = 1/sqrt(Σx̂²/n + eps·2^-2e) and r·x = rs·x̂ with r the RMS factor of the
// definition: no product of the kernels overflows while x is finite. When max|x| < 1 the
// factor is 1 and every value is bit-identical to the unscaled formula.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "cpu_gemm.h"      // silu(g) = g / (1 + e^-g), the one FP32 definition of the backend
#include "cpu_parallel.h"  // kParallelMinWork

namespace bufferlab::cpu::mhc {

// FP32 values per stack chunk of a row (2 KiB).
inline constexpr uint64_t kChunk = 512;
// The largest mix vector: (2 + hc)·hc rows [pre | post | comb] at hc = kMaxMhcMult (288).
inline constexpr uint64_t kMaxMix = (2 + kMaxMhcMult) * kMaxMhcMult;

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

inline Eigen::Index idx(uint64_t v) { return static_cast<Eigen::Index>(v); }

// A rows × cols row-major view with row stride `stride` floats.
inline ConstMatrixMap matrix(const float* p, uint64_t rows, uint64_t cols, uint64_t stride) {
  return ConstMatrixMap(p, idx(rows), idx(cols), Eigen::OuterStride<>(idx(stride)));
}

// Every launch: 1 ≤ hc ≤ kMaxMhcMult (the per-token arrays are fixed-size stack arrays) and
// rows within the int64_t index range of the OpenMP loops. The message (op.params()) is built
// only on failure: a launch allocates nothing.
template <class Op>
void require_launchable(const Op& op, uint64_t rows, uint64_t hc) {
  if (hc == 0 || hc > kMaxMhcMult)
    throw Error(op.params() + ": hc = " + std::to_string(hc) + " outside the kernels' range 1.." +
                std::to_string(kMaxMhcMult) + " (kMaxHcMult)");
  if (rows > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw Error(op.params() + ": extents exceed the host index range");
}

inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// The factor 2^-max(e, 0) of x[0, n) (max|x| = m·2^e, m in [0.5, 1)), or NaN when x holds a
// NaN or ±Inf. One pass; PropagateNaN makes a NaN anywhere reach the maximum.
inline float inverse_scale(const float* x, uint64_t n) {
  if (n == 0) return 1.0f;
  const float m = ConstArrayMap(x, idx(n)).abs().maxCoeff<Eigen::PropagateNaN>();
  if (!std::isfinite(m)) return kNaN;
  int e = 0;
  (void)std::frexp(m, &e);
  return e > 0 ? std::ldexp(1.0f, -e) : 1.0f;
}

// rs = 1/sqrt(Σ(x·inv_s)²/n + eps·inv_s²) over x[0, n) (FP32 sum of the exact scaled
// squares); r·x = rs·(x·inv_s).
inline float scaled_rsqrt(const float* x, uint64_t n, float inv_s, float eps) {
  const float sum_sq = (ConstArrayMap(x, idx(n)) * inv_s).square().sum();
  return 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps * inv_s * inv_s);
}

// mix[m] = rs·Σ_k fn[m·K + k]·(x_k·inv_s) for m < rows ≤ kMaxMix: the flattened RMS and the
// mix GEMV of the pre / head steps over one token's x[0, K). The scaled x goes through a stack
// chunk (Eigen's GEMV reads it directly: no temporary). False for a non-finite token (mix
// untouched).
inline bool scaled_mix(const float* x, uint64_t K, const float* fn, uint64_t rows, float rms_eps,
                       float* mix) {
  const float inv_s = inverse_scale(x, K);
  if (std::isnan(inv_s)) return false;
  const float rs = scaled_rsqrt(x, K, inv_s, rms_eps);
  alignas(64) float xs[kChunk];
  VectorMap acc(mix, idx(rows));
  acc.setZero();
  for (uint64_t k0 = 0; k0 < K; k0 += kChunk) {
    const uint64_t kc = std::min(kChunk, K - k0);
    for (uint64_t k = 0; k < kc; ++k) xs[k] = x[k0 + k] * inv_s;
    acc.noalias() += matrix(fn + k0, rows, kc, K) * ConstVectorMap(xs, idx(kc));
  }
  acc *= rs;
  return true;
}

// y[d] = Σ_i pre_i·x[i·h + d] in i order, stored BF16 (pre and head block input).
inline void weighted_stream_sum(const float* x, const float* pre, uint64_t hc, uint64_t h,
                                uint16_t* y) {
  alignas(64) float acc[kChunk];
  for (uint64_t d0 = 0; d0 < h; d0 += kChunk) {
    const uint64_t c = std::min(kChunk, h - d0);
    const float* x0 = x + d0;
    for (uint64_t d = 0; d < c; ++d) acc[d] = pre[0] * x0[d];
    for (uint64_t i = 1; i < hc; ++i) {
      const float* xi = x + i * h + d0;
      const float p = pre[i];
      for (uint64_t d = 0; d < c; ++d) acc[d] += p * xi[d];
    }
    for (uint64_t d = 0; d < c; ++d) y[d0 + d] = f32_to_bf16_bits(acc[d]);
  }
}

// Per-stream RMS normalisation of one token (docs/spec/numerics.md §4): out[i·h + d] =
// store((x̂·rs_i)·(1 + w[i·h + d])) with the scale and rs of stream i alone. A token holding a NaN
// or ±Inf stores NaN in all hc·h outputs and returns false.
template <class Store>
bool norm_token(const float* x, const float* w, uint64_t hc, uint64_t h, float eps, Store store) {
  float inv_s[kMaxMhcMult];
  bool finite = true;
  for (uint64_t i = 0; i < hc; ++i) {
    inv_s[i] = inverse_scale(x + i * h, h);
    finite = finite && !std::isnan(inv_s[i]);
  }
  if (!finite) {
    for (uint64_t k = 0; k < hc * h; ++k) store(k, kNaN);
    return false;
  }
  for (uint64_t i = 0; i < hc; ++i) {
    const float* xi = x + i * h;
    const float* wi = w + i * h;
    const float s = inv_s[i];
    const float rs = scaled_rsqrt(xi, h, s, eps);
    for (uint64_t d = 0; d < h; ++d) store(i * h + d, ((xi[d] * s) * rs) * (1.0f + wi[d]));
  }
  return true;
}

}  // namespace bufferlab::cpu::mhc
