// The CPU backend's BF16-in / FP32-accumulate GEMM: C = A·Bᵀ over B = W [N, K] (BF16 rows),
// computed one kTileM×kTileN output tile at a time through Eigen FP32 products on panels
// widened into the thread's fixed tiles (cpu_scratch.h): C += A[:, k0:k0+kTileK] ·
// B[:, k0:k0+kTileK]ᵀ, accumulating every K panel in FP32. NaN and Inf propagate as the FP32
// arithmetic does. Private to the CPU backend.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "bufferlab/core/ops/projection.h"
#include "cpu_parallel.h"
#include "cpu_scratch.h"

namespace bufferlab::cpu {

// One output tile: t.c[i·kTileN + j] = Σ_k a_rows[i][k] · b[j·K + k] for i < m ≤ kTileM,
// j < n ≤ kTileN, k < K (FP32). A rows are BF16 or FP32; b points at row n0 of W.
void gemm_tile(const uint16_t* const* a_rows, uint64_t m, const uint16_t* b, uint64_t n, uint64_t K,
               const ThreadTiles& t);
void gemm_tile(const float* const* a_rows, uint64_t m, const uint16_t* b, uint64_t n, uint64_t K,
               const ThreadTiles& t);

// Whether the byte ranges [a, a + a_bytes) and [b, b + b_bytes) overlap.
bool overlaps(const void* a, uint64_t a_bytes, const void* b, uint64_t b_bytes);

// silu(g) = g / (1 + e^-g), FP32 (docs/spec/numerics.md §2).
float silu(float g);

// The dense driver: out rows r < rows of C = A·Wᵀ, A row r at row_of(r) (In = uint16_t BF16
// or float), W [N, K] BF16. Tiles run in parallel (dynamic schedule); sink(r0, m, n0, n, c)
// receives each finished tile, c row-major with row stride kTileN. Always called outside an
// OpenMP region of its own: every tile product then runs inside a team of several, where Eigen
// does not nest threads of its own (it would, with its own allocations, outside one), or on
// one thread with OpenMP offering one (cpu_parallel.h).
template <class In, class RowOf, class Sink>
void tiled_gemm(uint64_t rows, uint64_t K, uint64_t N, const uint16_t* weight, RowOf row_of,
                Sink sink, Scratch& scratch) {
  if (rows == 0 || N == 0) return;
  const uint64_t n_tiles = (N + kTileN - 1) / kTileN;
  const auto items = static_cast<int64_t>(((rows + kTileM - 1) / kTileM) * n_tiles);
  parallel_items(items, scratch.threads(), [&](int64_t item, int thread) {
    const ThreadTiles t = scratch.tiles(thread);
    const uint64_t r0 = static_cast<uint64_t>(item) / n_tiles * kTileM;
    const uint64_t n0 = static_cast<uint64_t>(item) % n_tiles * kTileN;
    const uint64_t m = std::min(kTileM, rows - r0), n = std::min(kTileN, N - n0);
    const In* a[kTileM];
    for (uint64_t i = 0; i < m; ++i) a[i] = row_of(r0 + i);
    gemm_tile(a, m, weight + n0 * K, n, K, t);
    sink(r0, m, n0, n, static_cast<const float*>(t.c));
  });
}

}  // namespace bufferlab::cpu
