// The tiled BF16 GEMM of the CPU backend (cpu_gemm.h) and the BF16 kinds of GemmOp
// (projection.h): store, SwiGLU epilogue and accumulate, FP32 math, BF16 stores.
#include "cpu_gemm.h"

#include <Eigen/Core>

#include <cmath>
#include <cstring>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "cpu_ops.h"

namespace bufferlab::cpu {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Panel = Eigen::Map<RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;

Panel panel(float* p, uint64_t rows, uint64_t cols, uint64_t stride) {
  return Panel(p, static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols),
               Eigen::OuterStride<>(static_cast<Eigen::Index>(stride)));
}

// FP32 copies of a K range: plain loops the compiler vectorizes (Eigen has no BF16 packet).
void widen(const uint16_t* in, uint64_t n, float* out) {
  for (uint64_t k = 0; k < n; ++k) out[k] = bf16_bits_to_f32(in[k]);
}
void widen(const float* in, uint64_t n, float* out) { std::memcpy(out, in, n * sizeof(float)); }

template <class In>
void tile_product(const In* const* a_rows, uint64_t m, const uint16_t* b, uint64_t n, uint64_t K,
                  const ThreadTiles& t) {
  Panel c = panel(t.c, m, n, kTileN);
  c.setZero();
  for (uint64_t k0 = 0; k0 < K; k0 += kTileK) {
    const uint64_t kt = std::min(kTileK, K - k0);
    for (uint64_t i = 0; i < m; ++i) widen(a_rows[i] + k0, kt, t.a + i * kTileK);
    for (uint64_t j = 0; j < n; ++j) widen(b + j * K + k0, kt, t.b + j * kTileK);
    c.noalias() += panel(t.a, m, kt, kTileK) * panel(t.b, n, kt, kTileK).transpose();
  }
}

// out = bf16(epilogue(c, out)) over one tile of a [rows, N] output.
void store_tile(GemmEpilogue e, uint16_t* out, uint64_t N, uint64_t r0, uint64_t m, uint64_t n0,
                uint64_t n, const float* c) {
  for (uint64_t i = 0; i < m; ++i) {
    uint16_t* o = out + (r0 + i) * N + n0;
    const float* v = c + i * kTileN;
    switch (e) {
      case GemmEpilogue::store:
        for (uint64_t j = 0; j < n; ++j) o[j] = f32_to_bf16_bits(v[j]);
        break;
      case GemmEpilogue::swiglu:
        for (uint64_t j = 0; j < n; ++j)
          o[j] = f32_to_bf16_bits(silu(v[j]) * bf16_bits_to_f32(o[j]));
        break;
      case GemmEpilogue::accumulate:
        for (uint64_t j = 0; j < n; ++j) o[j] = f32_to_bf16_bits(bf16_bits_to_f32(o[j]) + v[j]);
        break;
    }
  }
}

}  // namespace

void gemm_tile(const uint16_t* const* a_rows, uint64_t m, const uint16_t* b, uint64_t n, uint64_t K,
               const ThreadTiles& t) {
  tile_product(a_rows, m, b, n, K, t);
}

void gemm_tile(const float* const* a_rows, uint64_t m, const uint16_t* b, uint64_t n, uint64_t K,
               const ThreadTiles& t) {
  tile_product(a_rows, m, b, n, K, t);
}

bool overlaps(const void* a, uint64_t a_bytes, const void* b, uint64_t b_bytes) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

float silu(float g) { return g / (1.0f + std::exp(-g)); }

void gemm(const Workspace& ws, const GemmOp& op, Scratch& scratch) {
  const GemmOp::Bound p = op.bind(ws);  // checks the kind, dtypes and extents
  const GemmEpilogue epilogue = op.epilogue();
  const auto [rows, out_rows, K, N] = op.shape();
  // Tiles read x while others write out: the two must not share memory.
  if (overlaps(p.x, rows * K * 2, p.out, rows * N * 2))
    throw Error(op.params() + ": the activation overlaps the output");
  tiled_gemm<uint16_t>(
      rows, K, N, p.weight, [&](uint64_t r) { return p.x + r * K; },
      [&](uint64_t r0, uint64_t m, uint64_t n0, uint64_t n, const float* c) {
        store_tile(epilogue, p.out, N, r0, m, n0, n, c);
      },
      scratch);
}

}  // namespace bufferlab::cpu
