// Shared pieces of the CPU Gated DeltaNet kernels (ops/gdn.h, docs/spec/numerics.md §5): the pinned
// q/k L2 normalisation and softplus, the GQA key head of a value head, the column offsets of
// Q / K / V inside a conv output row, the per-item launch that lets Eigen's GEMM run inside an
// OpenMP team, and the index-range check. Private to the CPU backend; FP32 throughout.
#pragma once

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"  // kSoftplusThreshold: one softplus for GDN and SSD
#include "cpu_mamba2_common.h"          // softplus
#include "cpu_mhc_common.h"             // mhc::sigmoid, the backend's FP32 σ
#include "cpu_parallel.h"

namespace bufferlab::cpu::gdn {

inline constexpr uint64_t kChunk = GdnChunkCarve::kChunk;  // 64 tokens per chunk
inline constexpr uint64_t kHead = kGdnChunkedHeadDim;      // kd = vd = 128 (chunked path)
inline constexpr uint64_t kMaxHead = kMaxGdnHeadDim;       // recurrence bound on kd, vd

using mhc::sigmoid;

// One softplus for GDN's α and Mamba-2's dt (docs/spec/numerics.md §6's, pinned in ops/gdn.h).
using ssd::softplus;

// The FP32 constant kd^-1/2 q is multiplied by after its normalisation.
inline float query_scale(uint64_t kd) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(kd)));
}

// out[i] = (x[i]·(1/sqrt(Σx² + kGdnL2Eps)))·scale for i < n: the pinned L2 normalisation (the
// sum of squares in index order), then the query scale (scale = 1 for keys: exact).
inline void l2_normalise(const float* x, uint64_t n, float scale, float* out) {
  float sum_sq = 0.0f;
  for (uint64_t i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum_sq + kGdnL2Eps);
  for (uint64_t i = 0; i < n; ++i) out[i] = (x[i] * inv) * scale;
}

// Column layout of a conv output row [Q (nk·kd) | K (nk·kd) | V (nv·vd)] and the GQA mapping
// (value head v reads key head v / (nv/nk), repeat_interleave).
struct Columns {
  uint64_t nk = 0, kd = 0, nv = 0, vd = 0;

  uint64_t key_head(uint64_t v) const { return v / (nv / nk); }
  uint64_t q(uint64_t v) const { return key_head(v) * kd; }
  uint64_t k(uint64_t v) const { return nk * kd + key_head(v) * kd; }
  uint64_t v(uint64_t v) const { return 2 * nk * kd + v * vd; }
};

// Every launch: a loop count within the int64_t index range of the OpenMP loops. Messages
// (op.params()) are built only on failure: a launch allocates nothing.
template <class Op>
void require_index_range(const Op& op, uint64_t items) {
  if (items > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw Error(op.params() + ": extents exceed the host index range");
}

// The core's launches: nk ≥ 1 dividing nv (value head v reads key head v / (nv/nk)).
template <class Op>
void require_gqa(const Op& op, uint64_t nk, uint64_t nv) {
  if (nk == 0 || nv % nk != 0)
    throw Error(op.params() + ": nv = " + std::to_string(nv) + " is not a multiple of nk = " +
                std::to_string(nk) + " (GQA groups value heads per key head)");
}

// body(item) for item in [0, items) on a team of every OpenMP thread (dynamic schedule): the
// chunked stages run Eigen GEMMs per item, which stay serial (no threads, no allocation of
// their own) inside a team of several or when OpenMP offers one thread (cpu_parallel.h).
template <class Body>
void for_each_item(uint64_t items, Body body) {
  parallel_items(static_cast<int64_t>(items), omp_get_max_threads(),
                 [&](int64_t item, int) { body(static_cast<uint64_t>(item)); });
}

}  // namespace bufferlab::cpu::gdn
