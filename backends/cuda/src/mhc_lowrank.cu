// CUDA low-rank mHC pre step (docs/spec/numerics.md §4, ops/mhc.h), the per-token kernels:
//   norm      one block of 256 threads per token: per stream i, max|x_i| (block reduction,
//             and the token's non-finite flag), Σ(x_i/s_i)² (block reduction, fixed order),
//             then n = ((x/s)·rs)·(1 + w) — (x/s)·rs = x·r exactly, r = rs/s — stored FP32
//             (split path) or BF16 (slab path). A non-finite token stores NaN everywhere and
//             is counted once.
//   down      (split) one warp per (token, row of W_down | W_inject): the FP32 dot over hc·h,
//             a butterfly sum, then silu(v / hc) → low or 2σ(v / hc) → post.
//   collapse  (split) one thread per (token, d): for each stream i the r-long dot of W_up's
//             row i·h + d with low, σ, times n; Σ_i in stream order, times (1/hc), → bf16.
//   slab      the down GEMM's epilogue (bf16(silu(acc / hc))) and the collapse on the stored
//             BF16 intermediates (one thread per (token, max(h, hc)) column: block input and
//             post).
// Accurate expf, IEEE division; NaN propagates from a non-finite token's normed values
// through every later stage of that token only.
#include <algorithm>
#include <cstdint>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "cuda_check.h"
#include "mhc_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

using namespace mhc_device;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kMaxMhc = static_cast<int>(kMaxMhcMult);
constexpr uint64_t kMaxBlocks = 65535;

unsigned blocks_for(uint64_t items) {
  return static_cast<unsigned>(
      std::max<uint64_t>(1, std::min(kMaxBlocks, (items + kThreads - 1) / kThreads)));
}

__device__ float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

struct NormShared {
  float part[kWarps];
  float total;
  float inv_scale[kMaxMhc];  // 1/s_i
  float rs[kMaxMhc];         // 1/sqrt(Σ(x_i/s_i)²/h + eps/s_i²), IEEE sqrt and division
};

// The max (is_max) or sum of v over the block, in warp order; every thread gets the result.
// Safe to call back to back: `total` is read before any thread can reach the next call's
// first barrier.
__device__ float block_reduce(float v, bool is_max, NormShared& sh) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  v = is_max ? warp_max(v) : warp_sum(v);
  if (lane == 0) sh.part[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = sh.part[0];
    for (int w = 1; w < kWarps; ++w) s = is_max ? fmaxf(s, sh.part[w]) : s + sh.part[w];
    sh.total = s;
  }
  __syncthreads();
  return sh.total;
}

template <bool kBf16Out>
__global__ void __launch_bounds__(kThreads) mhc_norm_kernel(MhcNormLaunch a) {
  BL_SHARED(NormShared, sh);
  const uint64_t tid = threadIdx.x;
  const uint64_t t = blockIdx.x;
  const uint64_t hc = a.hc, h = a.h, W = hc * h;
  const float* x = a.streams + t * W;

  // Per stream: max|x_i| → 1/s_i; the token's non-finite flag.
  int bad = 0;
  for (uint64_t i = 0; i < hc; ++i) {
    float m = 0.0f;
    for (uint64_t d = tid; d < h; d += kThreads) {
      const float v = x[i * h + d];
      bad |= isfinite(v) ? 0 : 1;
      m = fmaxf(m, fabsf(v));
    }
    m = block_reduce(m, true, sh);
    if (tid == 0) sh.inv_scale[i] = isfinite(m) ? inverse_scale(m) : 1.0f;
  }
  bad = __syncthreads_or(bad);

  // Per stream: rs_i from the scaled sum of squares.
  for (uint64_t i = 0; i < hc; ++i) {
    const float inv = sh.inv_scale[i];
    float ss = 0.0f;
    for (uint64_t d = tid; d < h; d += kThreads) {
      const float v = x[i * h + d] * inv;  // exact: a power of two
      ss = fmaf(v, v, ss);
    }
    ss = block_reduce(ss, false, sh);
    if (tid == 0) {
      const float eps_scaled = __fmul_rn(__fmul_rn(a.eps, inv), inv);  // eps/s²
      sh.rs[i] = 1.0f / sqrtf(__fadd_rn(ss / static_cast<float>(h), eps_scaled));
    }
  }
  __syncthreads();

  for (uint64_t i = 0; i < hc; ++i) {
    const float inv = sh.inv_scale[i], rs = sh.rs[i];
    for (uint64_t d = tid; d < h; d += kThreads) {
      const uint64_t at = t * W + i * h + d;
      const float n =
          bad ? quiet_nan()
              : __fmul_rn(__fmul_rn(x[i * h + d] * inv, rs), 1.0f + a.norm_w[i * h + d]);
      if constexpr (kBf16Out)
        a.normed_bf16[at] = f32_to_bf16_bits(n);
      else
        a.normed_f32[at] = n;
    }
  }
  if (bad && tid == 0) atomicAdd(a.nonfinite, 1ull);
}

__global__ void __launch_bounds__(kThreads) mhc_split_down_kernel(MhcSplitDownLaunch a) {
  const uint64_t lane = threadIdx.x % kWarpSize;
  const uint64_t item = static_cast<uint64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  const uint64_t outputs = a.r + a.hc, W = a.hc * a.h;
  if (item >= a.rows * outputs) return;  // uniform per warp
  const uint64_t t = item / outputs, o = item % outputs;
  const float* n = a.normed + t * W;
  const float* w = a.w_down_inject + o * W;
  float s = 0.0f;
  for (uint64_t k = lane; k < W; k += kWarpSize) s = fmaf(w[k], n[k], s);
  s = warp_sum(s);
  if (lane != 0) return;
  const float v = s / static_cast<float>(a.hc);
  if (o < a.r)
    a.low[t * a.r + o] = silu(v);
  else
    a.post[t * a.hc + (o - a.r)] = 2.0f * sigmoid(v);
}

__global__ void __launch_bounds__(kThreads) mhc_split_collapse_kernel(MhcSplitCollapseLaunch a) {
  const uint64_t n = a.rows * a.h, W = a.hc * a.h;
  for (uint64_t item = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; item < n;
       item += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t t = item / a.h, d = item % a.h;
    const float* low = a.low + t * a.r;
    float acc = 0.0f;
    for (uint64_t i = 0; i < a.hc; ++i) {
      const uint64_t c = i * a.h + d;
      const float* wu = a.w_up + c * a.r;
      float u = 0.0f;
      for (uint64_t j = 0; j < a.r; ++j) u = fmaf(wu[j], low[j], u);
      acc = fmaf(sigmoid(u), a.normed[t * W + c], acc);
    }
    a.block_in[item] = f32_to_bf16_bits(__fmul_rn(1.0f / static_cast<float>(a.hc), acc));
  }
}

__global__ void mhc_down_epilogue_kernel(const float* acc, uint16_t* low, uint64_t n, float hc) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x)
    low[i] = f32_to_bf16_bits(silu(acc[i] / hc));
}

__global__ void __launch_bounds__(kThreads) mhc_slab_collapse_kernel(MhcSlabCollapseLaunch a) {
  const uint64_t cols = a.h > a.hc ? a.h : a.hc, W = a.hc * a.h;
  const uint64_t n = a.rows * cols;
  const float hc = static_cast<float>(a.hc);
  for (uint64_t item = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; item < n;
       item += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t t = item / cols, d = item % cols;
    if (d < a.h) {
      float acc = 0.0f;
      for (uint64_t i = 0; i < a.hc; ++i) {
        const uint64_t at = t * W + i * a.h + d;
        acc = fmaf(sigmoid(bf16_bits_to_f32(a.up_pre[at])), bf16_bits_to_f32(a.normed[at]), acc);
      }
      a.block_in[t * a.h + d] = f32_to_bf16_bits(__fmul_rn(1.0f / hc, acc));
    }
    if (d < a.hc)
      a.post[t * a.hc + d] = 2.0f * sigmoid(bf16_bits_to_f32(a.inj_pre[t * a.hc + d]) / hc);
  }
}

void check_mhc(const char* what, uint64_t hc) {
  if (hc == 0 || hc > kMaxMhcMult)
    throw Error(std::string(what) + ": hc = " + std::to_string(hc) +
                " outside [1, kMaxHcMult = " + std::to_string(kMaxMhcMult) + "]");
}

}  // namespace

void launch_mhc_lowrank_norm(const MhcNormLaunch& a, cudaStream_t stream) {
  if (a.rows == 0 || a.h == 0) return;
  check_mhc("hc_lowrank norm", a.hc);
  if ((a.normed_f32 == nullptr) == (a.normed_bf16 == nullptr))
    throw Error("hc_lowrank norm: exactly one of the FP32 / BF16 outputs must be set");
  if (a.rows > 0x7FFFFFFFull)
    throw Error("hc_lowrank norm: " + std::to_string(a.rows) + " rows exceed the grid limit");
  const auto blocks = static_cast<unsigned>(a.rows);
  if (a.normed_bf16 != nullptr)
    BL_LAUNCH(mhc_norm_kernel<true>, blocks, kThreads, 0, stream, a);
  else
    BL_LAUNCH(mhc_norm_kernel<false>, blocks, kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_mhc_split_down(const MhcSplitDownLaunch& a, cudaStream_t stream) {
  const uint64_t items = a.rows * (a.r + a.hc);
  if (items == 0) return;
  check_mhc("hc_lowrank_split down", a.hc);
  const uint64_t blocks = (items + kWarps - 1) / kWarps;
  if (blocks > 0x7FFFFFFFull)
    throw Error("hc_lowrank_split down: " + std::to_string(items) + " outputs exceed the grid");
  BL_LAUNCH(mhc_split_down_kernel, static_cast<unsigned>(blocks), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_mhc_split_collapse(const MhcSplitCollapseLaunch& a, cudaStream_t stream) {
  const uint64_t items = a.rows * a.h;
  if (items == 0) return;
  check_mhc("hc_lowrank_split collapse", a.hc);
  BL_LAUNCH(mhc_split_collapse_kernel, blocks_for(items), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_mhc_down_epilogue(const float* acc, uint16_t* low, uint64_t n, uint64_t hc,
                              cudaStream_t stream) {
  if (n == 0) return;
  check_mhc("hc_lowrank_slab down", hc);
  BL_LAUNCH(mhc_down_epilogue_kernel, blocks_for(n), kThreads, 0, stream, acc, low, n,
            static_cast<float>(hc));
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_mhc_slab_collapse(const MhcSlabCollapseLaunch& a, cudaStream_t stream) {
  const uint64_t items = a.rows * std::max(a.h, a.hc);
  if (items == 0) return;
  check_mhc("hc_lowrank_slab collapse", a.hc);
  BL_LAUNCH(mhc_slab_collapse_kernel, blocks_for(items), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
