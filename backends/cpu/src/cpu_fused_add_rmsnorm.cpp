// CPU fused residual add + RMSNorm (docs/spec/numerics.md §1): rows in parallel with OpenMP, each
// row in stack chunks reduced with Eigen. Extents come from op.shape() only; nothing is allocated.
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "cpu_ops.h"
#include "cpu_parallel.h"

namespace bufferlab::cpu {
namespace {

// Rows are processed in chunks widened to FP32 in a stack buffer: Eigen vectorizes FP32 arrays
// but has no packet type for 16-bit integers, and the op may not allocate. The element loops
// are plain and branch-free so the compiler vectorizes them; Eigen does the reductions.
constexpr uint64_t kChunk = 512;
using ChunkMap = Eigen::Map<Eigen::ArrayXf, Eigen::Aligned16>;

// Below this many elements the thread start-up costs more than the rows.
constexpr uint64_t kParallelMinElements = uint64_t{1} << 15;

using RowPointers = FusedAddRmsNormOp::Bound;

// Pass 1 over one chunk: residual = bf16(residual + x) stored; returns Σ r² of the STORED values
// (the norm never sees the FP32 sum). Conversions are the shared ones of number_formats.h.
float add_and_square(const RowPointers& p, uint64_t at, uint64_t n, bool add) {
  alignas(16) float r[kChunk];
  uint16_t* res = p.residual + at;
  if (add) {
    const uint16_t* x = p.input + at;
    for (uint64_t k = 0; k < n; ++k) {
      const uint16_t stored = f32_to_bf16_bits(bf16_bits_to_f32(res[k]) + bf16_bits_to_f32(x[k]));
      res[k] = stored;
      r[k] = bf16_bits_to_f32(stored);
    }
  } else {
    for (uint64_t k = 0; k < n; ++k) r[k] = bf16_bits_to_f32(res[k]);
  }
  return ChunkMap(r, static_cast<Eigen::Index>(n)).square().sum();
}

// Pass 2 over one chunk: y = (r · inv) · (1 + w), stored BF16 (and FP32 when asked).
void normalise(const RowPointers& p, uint64_t at, uint64_t col, uint64_t n, float inv) {
  alignas(16) float y[kChunk];
  const uint16_t* res = p.residual + at;
  const uint16_t* w = p.weight + col;
  for (uint64_t k = 0; k < n; ++k)
    y[k] = (bf16_bits_to_f32(res[k]) * inv) * (1.0f + bf16_bits_to_f32(w[k]));
  uint16_t* out = p.output + at;
  for (uint64_t k = 0; k < n; ++k) out[k] = f32_to_bf16_bits(y[k]);
  if (p.output_f32 != nullptr)
    Eigen::Map<Eigen::ArrayXf>(p.output_f32 + at, static_cast<Eigen::Index>(n)) =
        ChunkMap(y, static_cast<Eigen::Index>(n));
}

void norm_row(const RowPointers& p, uint64_t row, uint64_t width, float eps, bool add) {
  const uint64_t base = row * width;
  float sum_sq = 0.0f;
  for (uint64_t col = 0; col < width; col += kChunk)
    sum_sq += add_and_square(p, base + col, std::min<uint64_t>(kChunk, width - col), add);
  // A non-finite row normalises to NaN everywhere (the defined result, oracle/rmsnorm.h).
  const float inv = std::isfinite(sum_sq)
                        ? 1.0f / std::sqrt(sum_sq / static_cast<float>(width) + eps)
                        : std::numeric_limits<float>::quiet_NaN();
  for (uint64_t col = 0; col < width; col += kChunk)
    normalise(p, base + col, col, std::min<uint64_t>(kChunk, width - col), inv);
}

}  // namespace

void fused_add_rmsnorm(const Workspace& ws, const FusedAddRmsNormOp& op) {
  const uint64_t rows = op.shape().rows;
  const uint64_t width = op.shape().width;
  const uint64_t n = (Size(rows) * width).value();
  if (n == 0) return;
  const RmsNormVariant v = op.variant;
  if (rows > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw Error(op.params() + ": extents exceed the host index range");

  const RowPointers p = op.bind(ws);

  const float eps = static_cast<float>(op.eps);
  const auto row_count = static_cast<int64_t>(rows);
  parallel_for(row_count, n >= kParallelMinElements, [&](int64_t t) {
    norm_row(p, static_cast<uint64_t>(t), width, eps, v.add_residual);
  });
}

}  // namespace bufferlab::cpu
