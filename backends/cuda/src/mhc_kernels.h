// Launchers of the CUDA mHC kernels (docs/spec/numerics.md §3–§4, core ops/mhc.h):
//   mhc_sinkhorn.cu  the flattened-RMS mix kernel of the pre step (Sinkhorn form) and the head
//   mhc_lowrank.cu   the low-rank per-stream norm, the split path's down / collapse and the
//                    slab path's GEMM epilogues and collapse
//   mhc_post.cu      the post step (both forms) and the expand
// Arguments are device pointers already bound (bounds-checked) by the op descriptors and
// extents from op.shape(); the callers refuse hc = 0 and hc > kMaxMhcMult. Every launcher
// checks its launch and enqueues on `stream`. FP32 math throughout, accurate expf and IEEE
// division (no fast-math intrinsics). Private to the CUDA backend.
#pragma once

#include "cuda_platform.h"

#include <cstdint>

namespace bufferlab::BUFFERLAB_CUDA_NS {

// ---- pre (Sinkhorn form) and head (mhc_sinkhorn.cu) ----

// Per token t (x = streams[t], the flattened hc·h vector), with s = max(1, 2^e) from
// max|x| = m·2^e:  rs = 1/sqrt(Σ(x/s)²/(hc·h) + eps/s²)  and  mix_m = rs·Σ_k fn[m, k]·(x_k/s)
// (= r·(fn·x) exactly, r = rs/s, without the overflow of fn·x or x²). Then
//   head = false: pre, post → post, Sinkhorn comb → comb (docs/spec/numerics.md §3 steps 3–4);
//   head = true:  fn has hc rows and scale one entry: pre only;
// and out[t, d] = bf16(Σ_i pre_i·x[i, d]). A token holding a NaN or ±Inf writes NaN to every
// output and adds 1 to *nonfinite.
struct MhcMixLaunch {
  const float* streams = nullptr;           // [rows, hc, h]
  const float* fn = nullptr;                // [mix, hc·h]; mix = (2 + hc)·hc, or hc for the head
  const float* scale = nullptr;             // [3], or [1] for the head
  const float* bias = nullptr;              // [mix]
  float* post = nullptr;                    // [rows, hc]; null for the head
  float* comb = nullptr;                    // [rows, hc, hc]; null for the head
  uint16_t* out = nullptr;                  // bf16 [rows, h]: block input, or the head's output
  unsigned long long* nonfinite = nullptr;  // device counter, added to
  uint64_t rows = 0, hc = 0, h = 0, iters = 0;
  float rms_eps = 0.0f, hc_eps = 0.0f;
  bool head = false;
  bool skip_final_column = false;  // kernel mutant M-SKCOL
  bool column_first = false;       // kernel mutant M-SKORDER: column before row in the loop
};
void launch_mhc_mix(const MhcMixLaunch& a, cudaStream_t stream);

// ---- low-rank form (mhc_lowrank.cu) ----

// Per token, per stream i: n_i = ((x_i/s_i)·rs_i)·(1 + w_i), rs_i = 1/sqrt(Σ(x_i/s_i)²/h +
// eps/s_i²) (s_i from max|x_i| as above), stored FP32 (normed_f32) or BF16 (normed_bf16;
// exactly one is set). A token with a non-finite stream value writes NaN to all hc·h values
// and adds 1 to *nonfinite.
struct MhcNormLaunch {
  const float* streams = nullptr;   // [rows, hc, h]
  const float* norm_w = nullptr;    // [hc, h]
  float* normed_f32 = nullptr;      // [rows, hc·h]
  uint16_t* normed_bf16 = nullptr;  // [rows, hc·h]
  unsigned long long* nonfinite = nullptr;
  uint64_t rows = 0, hc = 0, h = 0;
  float eps = 0.0f;
};
void launch_mhc_lowrank_norm(const MhcNormLaunch& a, cudaStream_t stream);

// Split path, down: for row o < r + hc of w_down_inject, v = (w[o]·normed[t]) / hc;
// o < r: low[t, o] = silu(v); else post[t, o − r] = 2σ(v). One warp per (t, o).
struct MhcSplitDownLaunch {
  const float* normed = nullptr;         // [rows, hc·h]
  const float* w_down_inject = nullptr;  // [r + hc, hc·h]
  float* low = nullptr;                  // [rows, r]
  float* post = nullptr;                 // [rows, hc]
  uint64_t rows = 0, hc = 0, h = 0, r = 0;
};
void launch_mhc_split_down(const MhcSplitDownLaunch& a, cudaStream_t stream);

// Split path, collapse: block_in[t, d] = bf16((Σ_i σ(w_up[i·h + d]·low[t])·normed[t, i·h + d])
// / hc). One thread per (t, d).
struct MhcSplitCollapseLaunch {
  const float* normed = nullptr;  // [rows, hc·h]
  const float* low = nullptr;     // [rows, r]
  const float* w_up = nullptr;    // [hc·h, r]
  uint16_t* block_in = nullptr;   // [rows, h]
  uint64_t rows = 0, hc = 0, h = 0, r = 0;
};
void launch_mhc_split_collapse(const MhcSplitCollapseLaunch& a, cudaStream_t stream);

// Slab path, the down GEMM's epilogue: low[i] = bf16(silu(acc[i] / hc)) over n values (the
// FP32 GEMM result rows and the low rows have the same stride r).
void launch_mhc_down_epilogue(const float* acc, uint16_t* low, uint64_t n, uint64_t hc,
                              cudaStream_t stream);

// Slab path, collapse: block_in[t, d] = bf16((Σ_i σ(up_pre[t, i·h + d])·normed[t, i·h + d]) /
// hc) and post[t, i] = 2σ(inj_pre[t, i] / hc), FP32 math on the stored BF16 values.
struct MhcSlabCollapseLaunch {
  const uint16_t* normed = nullptr;   // [rows, hc·h]
  const uint16_t* up_pre = nullptr;   // [rows, hc·h]
  const uint16_t* inj_pre = nullptr;  // [rows, hc]
  uint16_t* block_in = nullptr;       // [rows, h]
  float* post = nullptr;              // [rows, hc]
  uint64_t rows = 0, hc = 0, h = 0;
};
void launch_mhc_slab_collapse(const MhcSlabCollapseLaunch& a, cudaStream_t stream);

// ---- post and expand (mhc_post.cu) ----

// comb != null (Sinkhorn form): out[t, j, d] = post_j·block_out[t, d] + Σ_i comb_ij·x[t, i, d];
// comb == null (low-rank form): out[t, i, d] = x[t, i, d] + post_i·block_out[t, d]. One thread
// per (t, d) loads all hc stream values before it writes any, so out may equal streams (the
// result is the same bit for bit). round_bf16 (kernel mutant B13) rounds every written value
// to BF16.
struct MhcPostLaunch {
  const float* post = nullptr;          // [rows, hc]
  const float* comb = nullptr;          // [rows, hc, hc] or null
  const uint16_t* block_out = nullptr;  // bf16 [rows, h]
  const float* streams = nullptr;       // [rows, hc, h]
  float* out = nullptr;                 // [rows, hc, h]; may equal streams
  uint64_t rows = 0, hc = 0, h = 0;
  bool round_bf16 = false;
};
void launch_mhc_post(const MhcPostLaunch& a, cudaStream_t stream);

// streams[t, i, d] = input[t, d] (BF16 → FP32, exact) for every stream i.
void launch_mhc_expand(const uint16_t* input, float* streams, uint64_t rows, uint64_t hc,
                       uint64_t h, cudaStream_t stream);

}  // namespace bufferlab::BUFFERLAB_CUDA_NS

#if defined(__CUDACC__) || defined(BUFFERLAB_CUDA_SIM)
// Device helpers shared by the mHC kernels (CUDA translation units only).
namespace bufferlab::BUFFERLAB_CUDA_NS::mhc_device {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;

// σ(z) = 1 / (1 + e^−z), accurate expf and IEEE division.
__device__ inline float sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }
// silu(v) = v / (1 + e^−v) (as the GEMM epilogue of gemm.cu).
__device__ inline float silu(float v) { return v / (1.0f + expf(-v)); }

// 2^−e for the power-of-two scaling of ops/mhc.h: s = max(1, 2^e) with max|x| = m·2^e,
// m ∈ [0.5, 1); returns 1/s (exact: 2^−e ≥ 2^−128 is representable, as a subnormal at the
// top of the range). `max_abs` must be finite.
__device__ inline float inverse_scale(float max_abs) {
  int e = 0;
  frexpf(max_abs, &e);
  return e > 0 ? ldexpf(1.0f, -e) : 1.0f;
}

__device__ inline float quiet_nan() { return __int_as_float(0x7FC00000); }

}  // namespace bufferlab::BUFFERLAB_CUDA_NS::mhc_device
#endif
