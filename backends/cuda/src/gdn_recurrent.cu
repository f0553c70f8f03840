// CUDA GDN recurrence (ops/gdn.h GdnRecurrentOp): one block per (sequence, value head,
// 32-column slice of vd), tokens in order. The value head's columns are independent (δ_j,
// S[:, j] and o_j need column j and the shared k, q only), so a block holds its slice of the
// FP32 state in registers: 128 threads = 4 row groups × 32 columns, thread (g, x) owning rows
// g, g + 4, ... of column x (kd ≤ 256: at most 64 registers). Per token: warp 0 normalises k,
// warp 1 q (times q_scale) into shared memory; each thread sums its rows of Sᵀk, the four row
// groups' partials are added in group order; δ = β(v − α·Sᵀk), S = α·S + k·δ, and Sᵀq is
// reduced the same way; row group 0 stores o as BF16. Three barriers per token; the partial
// arrays are double (one for Sᵀk, one for Sᵀq), so no write overtakes a read.
#include <algorithm>
#include <cstdint>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/gdn.h"
#include "cuda_check.h"
#include "gdn_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

using namespace gdn_device;

constexpr int kThreads = 128;
constexpr int kCols = 32;
constexpr int kRowGroups = kThreads / kCols;  // 4
constexpr int kMaxDim = static_cast<int>(kMaxGdnHeadDim);
constexpr int kRowsPerThread = kMaxDim / kRowGroups;  // 64
constexpr uint64_t kMaxGridX = 0x7FFFFFFF;

__global__ void __launch_bounds__(kThreads) gdn_recurrent_kernel(GdnRecurrentLaunch a) {
  BL_SHARED(float[2][kMaxDim], kq);                 // normalised k; scaled normalised q
  BL_SHARED(float[2][kRowGroups][kCols], partial);  // per row group: Sᵀk, then Sᵀq
  const uint64_t slices = (a.vd + kCols - 1) / kCols;
  const uint64_t slice = blockIdx.x % slices, sh = blockIdx.x / slices;
  const uint64_t h = sh % a.nv, seq = sh / a.nv;
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % kCols, ty = tid / kCols;
  const int lane = tid % kWarpSize, warp = tid / kWarpSize;
  const uint64_t j = slice * kCols + tx;
  const bool has_col = j < a.vd;
  const int kd = static_cast<int>(a.kd);
  const uint64_t kh = h / (a.nv / a.nk);
  const uint64_t q_col = kh * a.kd, k_col = a.nk * a.kd + kh * a.kd;
  const uint64_t v_col = 2 * a.nk * a.kd + h * a.vd;
  float* state = a.state + (seq * a.nv + h) * a.kd * a.vd;

  float s[kRowsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int i = ty + kRowGroups * r;
    s[r] = i < kd && has_col ? state[i * a.vd + j] : 0.0f;
  }

  for (uint64_t p = 0; p < a.L; ++p) {
    const uint64_t t = seq * a.L + p;
    const float* row = a.conv + t * a.conv_dim;
    if (warp < 2) {
      const float* x = row + (warp == 0 ? k_col : q_col);
      const float inv = l2_inverse_norm(x, kd, kGdnL2Eps);
      for (int i = lane; i < kd; i += kWarpSize)
        kq[warp][i] = warp == 0 ? x[i] * inv : x[i] * inv * a.q_scale;
    }
    __syncthreads();

    const float beta = a.gates[(t * a.nv + h) * 2];
    const float alpha = a.gates[(t * a.nv + h) * 2 + 1];
    const float v = has_col ? row[v_col + j] : 0.0f;
    float sk = 0.0f;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int i = ty + kRowGroups * r;
      if (i < kd) sk += s[r] * kq[0][i];
    }
    partial[0][ty][tx] = sk;
    __syncthreads();

    float stk = partial[0][0][tx];
#pragma unroll
    for (int g = 1; g < kRowGroups; ++g) stk += partial[0][g][tx];
    const float delta = beta * (v - alpha * stk);
    float sq = 0.0f;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int i = ty + kRowGroups * r;
      if (i < kd) {
        s[r] = alpha * s[r] + kq[0][i] * delta;
        sq += s[r] * kq[1][i];
      }
    }
    partial[1][ty][tx] = sq;
    __syncthreads();

    if (ty == 0 && has_col) {
      float o = partial[1][0][tx];
#pragma unroll
      for (int g = 1; g < kRowGroups; ++g) o += partial[1][g][tx];
      a.output[t * a.nv * a.vd + h * a.vd + j] = f32_to_bf16_bits(o);
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int i = ty + kRowGroups * r;
    if (i < kd && has_col) state[i * a.vd + j] = s[r];
  }
}

}  // namespace

void launch_gdn_recurrent(const GdnRecurrentLaunch& a, cudaStream_t stream) {
  if (a.sequences == 0 || a.L == 0 || a.nv == 0 || a.vd == 0) return;
  if (a.kd > kMaxGdnHeadDim || a.vd > kMaxGdnHeadDim)
    throw Error("gdn_recurrent: kd and vd must be at most " + std::to_string(kMaxGdnHeadDim));
  const uint64_t blocks = a.sequences * a.nv * ((a.vd + kCols - 1) / kCols);
  if (blocks > kMaxGridX)
    throw Error("gdn_recurrent: " + std::to_string(blocks) + " blocks exceed the grid limit");
  BL_LAUNCH(gdn_recurrent_kernel, static_cast<unsigned>(blocks), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
