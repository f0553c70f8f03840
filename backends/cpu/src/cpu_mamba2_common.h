// Shared pieces of the CPU Mamba-2 kernels (ops/mamba2.h, docs/spec/numerics.md §6): the pinned
// dt (softplus with threshold 20, clamped to [1e-9, 1e9]), BF16 row widening, the column
// offsets of x / B / C inside an xBC row, and the Eigen views the scan and the recurrence run
// their matrix-vector products on. Private to the CPU backend; FP32 throughout.
//
// Only matrix-VECTOR products go through Eigen here: its GEMV neither allocates (on contiguous
// operands) nor starts threads, whereas its GEMM may do both outside an OpenMP team
// (cpu_parallel.h) and heap-allocates panels above 128 KiB.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mamba2.h"
#include "cpu_parallel.h"  // kParallelMinWork

namespace bufferlab::cpu::ssd {

inline constexpr uint64_t kChunk = Mamba2ChunkCarve::kChunk;  // 64 tokens per SSD chunk

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;

inline Eigen::Index idx(uint64_t v) { return static_cast<Eigen::Index>(v); }

// A rows × cols row-major view with row stride `stride` floats.
inline ConstMatrixMap matrix(const float* p, uint64_t rows, uint64_t cols, uint64_t stride) {
  return ConstMatrixMap(p, idx(rows), idx(cols), Eigen::OuterStride<>(idx(stride)));
}

// softplus(x) = x above the threshold (20), else log1p(exp(x)), FP32.
inline float softplus(float x) { return x > kSoftplusThreshold ? x : std::log1p(std::exp(x)); }

// dt = min(max(softplus(dt_raw + dt_bias), 1e-9), 1e9); a NaN stays NaN (std::max / std::min
// return their first argument when the comparison is false).
inline float step(float dt_raw, float dt_bias) {
  return std::min(std::max(softplus(dt_raw + dt_bias), kMamba2DtMin), kMamba2DtMax);
}

// out[i] = in[i] widened from BF16, i < n.
inline void widen(const uint16_t* in, uint64_t n, float* out) {
  for (uint64_t i = 0; i < n; ++i) out[i] = bf16_bits_to_f32(in[i]);
}

// Column offsets inside an xBC row [x (d_inner) | B (G·N) | C (G·N)] (bind refuses ng = 0, so
// the group count of the layout is G).
inline uint64_t b_column(uint64_t d_inner, uint64_t N, uint64_t g) { return d_inner + g * N; }
inline uint64_t c_column(uint64_t d_inner, uint64_t N, uint64_t G, uint64_t g) {
  return d_inner + G * N + g * N;
}

}  // namespace bufferlab::cpu::ssd
