// CPU low-rank mHC pre step (docs/spec/numerics.md §4, ops/mhc.h): the split path (T ≤ 64, FP32
// weights and intermediates, per-token Eigen GEMVs in parallel over tokens) and the GEMM path (one
// slab of ≤ 2048 tokens, BF16 intermediates at the MhcGemmCarve offsets, the down / inject / up
// products on the backend's tiled BF16 GEMM with FP32 accumulation).
//
// A token whose streams hold a NaN or ±Inf is found and counted by the norm stage, which
// stores NaN in all hc·h of its normed values; the later stages carry those NaNs through their
// FP32 arithmetic (every output of the token depends on its whole normed row) and count
// nothing, so a pass counts each bad token once.
#include <algorithm>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cpu_gemm.h"
#include "cpu_mhc_common.h"
#include "cpu_ops.h"
#include "cpu_parallel.h"

namespace bufferlab::cpu {
namespace {

using mhc::ConstVectorMap;
using mhc::idx;
using mhc::kChunk;
using mhc::matrix;
using mhc::sigmoid;
using mhc::VectorMap;

uint64_t norm_work(uint64_t rows, uint64_t hc, uint64_t h) { return rows * hc * h; }

// --- split path ------------------------------------------------------------------------------

MhcDiagnostics split_norm(const MhcLowRankSplitOp::Bound& b, uint64_t rows, uint64_t hc, uint64_t h,
                          float eps) {
  const uint64_t K = hc * h;
  const auto n = static_cast<int64_t>(rows);
  const uint64_t bad = parallel_sum(n, norm_work(rows, hc, h) >= kParallelMinWork, [&](int64_t ti) {
    const auto t = static_cast<uint64_t>(ti);
    float* out = b.normed + t * K;
    const bool ok = mhc::norm_token(b.streams + t * K, b.norm_w, hc, h, eps,
                                    [out](uint64_t k, float v) { out[k] = v; });
    return ok ? uint64_t{0} : uint64_t{1};
  });
  return MhcDiagnostics{bad};
}

// low = silu((W_down·n)/hc) written in place of the GEMV result; post_i = 2σ((W_inject·n)_i/hc).
void split_down(const MhcLowRankSplitOp::Bound& b, uint64_t rows, uint64_t hc, uint64_t h,
                uint64_t r) {
  const uint64_t K = hc * h;
  const float hcf = static_cast<float>(hc);
  const auto n = static_cast<int64_t>(rows);
  parallel_for(n, rows * K * (r + hc) >= kParallelMinWork, [&](int64_t ti) {
    const auto t = static_cast<uint64_t>(ti);
    const ConstVectorMap x(b.normed + t * K, idx(K));
    float* low = b.low + t * r;
    VectorMap(low, idx(r)).noalias() = matrix(b.w_down_inject, r, K, K) * x;
    for (uint64_t j = 0; j < r; ++j) low[j] = silu(low[j] / hcf);
    float inj[kMaxMhcMult];
    VectorMap(inj, idx(hc)).noalias() = matrix(b.w_down_inject + r * K, hc, K, K) * x;
    for (uint64_t i = 0; i < hc; ++i) b.post[t * hc + i] = 2.0f * sigmoid(inj[i] / hcf);
  });
}

// y[d] = bf16((1/hc)·Σ_i σ((W_up·low)[i·h + d])·n[i·h + d]), the gate GEMV computed one column
// chunk of one stream at a time into the stack.
void split_collapse(const MhcLowRankSplitOp::Bound& b, uint64_t rows, uint64_t hc, uint64_t h,
                    uint64_t r) {
  const uint64_t K = hc * h;
  const float inv_mhc = 1.0f / static_cast<float>(hc);
  const auto n = static_cast<int64_t>(rows);
  parallel_for(n, rows * K * r >= kParallelMinWork, [&](int64_t ti) {
    const auto t = static_cast<uint64_t>(ti);
    const ConstVectorMap low(b.low + t * r, idx(r));
    const float* normed = b.normed + t * K;
    uint16_t* y = b.block_in + t * h;
    alignas(64) float gate[kChunk];
    alignas(64) float acc[kChunk];
    for (uint64_t d0 = 0; d0 < h; d0 += kChunk) {
      const uint64_t c = std::min(kChunk, h - d0);
      for (uint64_t i = 0; i < hc; ++i) {
        VectorMap(gate, idx(c)).noalias() = matrix(b.w_up + (i * h + d0) * r, c, r, r) * low;
        const float* ni = normed + i * h + d0;
        if (i == 0)
          for (uint64_t d = 0; d < c; ++d) acc[d] = sigmoid(gate[d]) * ni[d];
        else
          for (uint64_t d = 0; d < c; ++d) acc[d] += sigmoid(gate[d]) * ni[d];
      }
      for (uint64_t d = 0; d < c; ++d) y[d0 + d] = f32_to_bf16_bits(inv_mhc * acc[d]);
    }
  });
}

// --- GEMM path -------------------------------------------------------------------------------

MhcDiagnostics slab_norm(const MhcLowRankSlabOp::Bound& b, uint64_t rows, uint64_t hc, uint64_t h,
                         float eps) {
  const uint64_t K = hc * h;
  const auto n = static_cast<int64_t>(rows);
  const uint64_t bad = parallel_sum(n, norm_work(rows, hc, h) >= kParallelMinWork, [&](int64_t ti) {
    const auto t = static_cast<uint64_t>(ti);
    uint16_t* out = b.normed + t * K;
    const bool ok = mhc::norm_token(b.streams + t * K, b.norm_w, hc, h, eps,
                                    [out](uint64_t k, float v) { out[k] = f32_to_bf16_bits(v); });
    return ok ? uint64_t{0} : uint64_t{1};
  });
  return MhcDiagnostics{bad};
}

// out[rows, N] = bf16(epilogue(A·Wᵀ)) with A rows of `a` (row stride K), W [N, K] BF16.
template <class Epilogue>
void slab_gemm(const uint16_t* a, uint64_t rows, uint64_t K, const uint16_t* w, uint64_t N,
               uint16_t* out, Epilogue epilogue, Scratch& scratch) {
  tiled_gemm<uint16_t>(
      rows, K, N, w, [a, K](uint64_t row) { return a + row * K; },
      [out, N, epilogue](uint64_t r0, uint64_t m, uint64_t n0, uint64_t n, const float* c) {
        for (uint64_t i = 0; i < m; ++i) {
          uint16_t* o = out + (r0 + i) * N + n0;
          const float* v = c + i * kTileN;
          for (uint64_t j = 0; j < n; ++j) o[j] = f32_to_bf16_bits(epilogue(v[j]));
        }
      },
      scratch);
}

// y[d] = bf16((1/hc)·Σ_i σ(up_pre[i·h + d])·normed[i·h + d]); post_i = 2σ(inj_pre_i/hc), FP32
// math on the stored BF16 values.
void slab_collapse(const MhcLowRankSlabOp::Bound& b, uint64_t rows, uint64_t hc, uint64_t h) {
  const uint64_t K = hc * h;
  const float hcf = static_cast<float>(hc), inv_mhc = 1.0f / hcf;
  const auto n = static_cast<int64_t>(rows);
  parallel_for(n, rows * K >= kParallelMinWork, [&](int64_t ti) {
    const auto t = static_cast<uint64_t>(ti);
    const uint16_t* up = b.up_pre + t * K;
    const uint16_t* normed = b.normed + t * K;
    uint16_t* y = b.block_in + t * h;
    alignas(64) float acc[kChunk];
    for (uint64_t d0 = 0; d0 < h; d0 += kChunk) {
      const uint64_t c = std::min(kChunk, h - d0);
      for (uint64_t d = 0; d < c; ++d)
        acc[d] = sigmoid(bf16_bits_to_f32(up[d0 + d])) * bf16_bits_to_f32(normed[d0 + d]);
      for (uint64_t i = 1; i < hc; ++i) {
        const uint64_t at = i * h + d0;
        for (uint64_t d = 0; d < c; ++d)
          acc[d] += sigmoid(bf16_bits_to_f32(up[at + d])) * bf16_bits_to_f32(normed[at + d]);
      }
      for (uint64_t d = 0; d < c; ++d) y[d0 + d] = f32_to_bf16_bits(inv_mhc * acc[d]);
    }
    for (uint64_t i = 0; i < hc; ++i)
      b.post[t * hc + i] = 2.0f * sigmoid(bf16_bits_to_f32(b.inj_pre[t * hc + i]) / hcf);
  });
}

}  // namespace

MhcDiagnostics mhc_lowrank_split(const Workspace& ws, const MhcLowRankSplitOp& op) {
  const auto [rows, hc, h, r] = op.shape();
  mhc::require_launchable(op, rows, hc);
  const MhcLowRankSplitOp::Bound b = op.bind(ws);
  switch (op.stage) {
    case MhcLowRankSplitOp::Stage::norm:
      return split_norm(b, rows, hc, h, static_cast<float>(op.rms_eps));
    case MhcLowRankSplitOp::Stage::down:
      split_down(b, rows, hc, h, r);
      break;
    case MhcLowRankSplitOp::Stage::collapse:
      split_collapse(b, rows, hc, h, r);
      break;
  }
  return {};
}

MhcDiagnostics mhc_lowrank_slab(const Workspace& ws, const MhcLowRankSlabOp& op, Scratch& scratch) {
  const auto [row0, rows, hc, h, r] = op.shape();
  mhc::require_launchable(op, rows, hc);
  const MhcLowRankSlabOp::Bound b = op.bind(ws);
  const uint64_t K = hc * h;
  const float hcf = static_cast<float>(hc);
  switch (op.stage) {
    case MhcLowRankSlabOp::Stage::norm:
      return slab_norm(b, rows, hc, h, static_cast<float>(op.rms_eps));
    case MhcLowRankSlabOp::Stage::down:
      slab_gemm(
          b.normed, rows, K, b.w_down, r, b.low, [hcf](float c) { return silu(c / hcf); }, scratch);
      break;
    case MhcLowRankSlabOp::Stage::inject:
      slab_gemm(
          b.normed, rows, K, b.w_inject, hc, b.inj_pre, [](float c) { return c; }, scratch);
      break;
    case MhcLowRankSlabOp::Stage::up:
      slab_gemm(
          b.low, rows, r, b.w_up, K, b.up_pre, [](float c) { return c; }, scratch);
      break;
    case MhcLowRankSlabOp::Stage::collapse:
      slab_collapse(b, rows, hc, h);
      break;
  }
  return {};
}

}  // namespace bufferlab::cpu
