// Launchers of the CUDA Mamba-2 kernels (docs/spec/numerics.md §6, core ops/mamba2.h pins every
// layout and rounding point):
//   mamba2_conv.cu       causal conv1d + SiLU over the xBC columns and its tail update; the gated
//                     RMSNorm
//   mamba2_chunk.cu      the chunked SSD stages: dt / dA_cumsum, CB, the scan
//   mamba2_recurrent.cu  the token-by-token recurrence
// Arguments are device pointers already bound (bounds-checked) by the op descriptors and
// extents from op.shape(); the host entry points (mamba2_ops.cpp) refuse what the kernels cannot
// hold. Every launcher checks its launch and enqueues on `stream`. FP32 math, accurate expf /
// log1pf / sqrtf and IEEE division (no fast-math intrinsics); every reduction runs in a fixed
// order, so a result does not depend on the launch or the timing (deterministic).
#pragma once

#include "cuda_platform.h"

#include <cstdint>

#include "bufferlab/core/ops/mamba2.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {

// ---- conv1d and gated norm (mamba2_conv.cu) ----

// out[t, c] = bf16(silu(bias[c] + Σ_{j<K} w[c, j]·x[t − (K−1) + j, c])), FP32 (bias first,
// then j ascending), x[r, c] = input[r, in_col + c]; positions before a sequence's first row
// come from its tail state [sequences, channels, K − 1] (oldest first). Then every tail is set
// to the last K − 1 inputs of (old tail ++ the sequence), in a second kernel, so the conv reads
// only the old tails.
struct Mamba2ConvLaunch {
  const uint16_t* input = nullptr;   // bf16 [rows, in_stride]
  const uint16_t* weight = nullptr;  // bf16 [channels, kernel]
  const uint16_t* bias = nullptr;    // bf16 [channels]
  uint16_t* state = nullptr;         // bf16 [sequences, channels, kernel − 1]
  uint16_t* output = nullptr;        // bf16 [rows, channels]
  uint64_t rows = 0, channels = 0, in_col = 0, in_stride = 0, kernel = 0, sequences = 0, L = 0;
};
void launch_mamba2_conv(const Mamba2ConvLaunch& a, cudaStream_t stream);

// Per row and group of group_size columns: g = o·silu(z), y = bf16((g·r)·w) with
// r = 1/sqrtf(Σg²/group_size + eps), FP32. One block per (row, group).
struct Mamba2GatedNormLaunch {
  const uint16_t* input = nullptr;   // bf16 [rows, d_inner]
  const uint16_t* z = nullptr;       // bf16 [rows, z_stride]; z at column 0
  const uint16_t* weight = nullptr;  // bf16 [d_inner]
  uint16_t* output = nullptr;        // bf16 [rows, d_inner]
  uint64_t rows = 0, d_inner = 0, group_size = 0, z_stride = 0;
  float eps = 0.0f;
};
void launch_mamba2_gated_norm(const Mamba2GatedNormLaunch& a, cudaStream_t stream);

// ---- chunked SSD of one sequence (mamba2_chunk.cu) ----

inline constexpr uint64_t kMamba2Chunk = Mamba2ChunkCarve::kChunk;  // 64 tokens per chunk

// Per head h and chunk c (one 64-thread block): dt_t = clamp(softplus(dt_raw_t + dt_bias_h)),
// dA_cumsum_t = Σ_{j≤t} dt_j·A_h (sequential, j ascending), A_h = −expf(A_log_h); stored at
// element (h·nc + c)·64 + t of dt / da, 0 for t past the sequence's rows.
struct Mamba2CumsumLaunch {
  const uint16_t* zxbcdt = nullptr;  // bf16 [rows, in_proj]
  const float* a_log = nullptr;      // [H]
  const float* dt_bias = nullptr;    // [H]
  float* dt = nullptr;
  float* da = nullptr;
  uint64_t rows = 0, chunks = 0, nc = 0, H = 0, in_proj = 0;
  uint64_t dt_col = 0;  // column of head 0's dt_raw (d_inner + d_xbc)
};
void launch_mamba2_cumsum(const Mamba2CumsumLaunch& a, cudaStream_t stream);

// CB[c][g][t][s] = Σ_n C_t[n]·B_s[n] (n ascending, FP32 fmaf chain on the BF16 values) for
// t, s < 64, 0 where t or s is past the rows. One block per (chunk, group), shared tiles.
struct Mamba2BmmLaunch {
  const uint16_t* xbc = nullptr;  // bf16 [rows, d_xbc]
  float* cb = nullptr;            // f32 [chunks, G, 64, 64]
  uint64_t rows = 0, chunks = 0, G = 0, N = 0, d_xbc = 0;
  uint64_t b_col = 0, c_col = 0;  // columns of group 0's B and C
};
void launch_mamba2_bmm(const Mamba2BmmLaunch& a, cudaStream_t stream);

// The scan of ops/mamba2.h, reading dt, dA_cumsum and CB as stored: one block per (head,
// P-slice of mamba2_slice_rows(P, N) rows) runs the chunks in order with its FP32 state slice in
// shared memory; y → output (BF16), the final state → state. reset_state_per_chunk: kernel
// mutant M-SSDSTATE (every chunk after the first starts from the zero state).
struct Mamba2ScanLaunch {
  const uint16_t* xbc = nullptr;  // bf16 [rows, d_xbc]
  const float* dt = nullptr;      // head stride nc·64
  const float* da = nullptr;      // head stride nc·64
  const float* cb = nullptr;      // f32 [chunks, G, 64, 64]
  const float* D = nullptr;       // [H]
  float* state = nullptr;         // f32 [H, P, N]
  uint16_t* output = nullptr;     // bf16 [rows, d_inner]
  uint64_t rows = 0, chunks = 0, nc = 0, H = 0, P = 0, N = 0, G = 0, d_inner = 0, d_xbc = 0;
  uint64_t b_col = 0, c_col = 0;
  bool reset_state_per_chunk = false;
};
void launch_mamba2_scan(const Mamba2ScanLaunch& a, cudaStream_t stream);

// ---- recurrence (mamba2_recurrent.cu) ----

// Per sequence, head and token, FP32: dt as for the cumsum, h ← expf(dt·A)·h + (dt·x_p)·B_n,
// y_p = Σ_n h[p][n]·C_n (n ascending) + D·x_p → BF16. One block per (sequence, head, P-slice).
struct Mamba2RecurrentLaunch {
  const uint16_t* zxbcdt = nullptr;  // bf16 [rows, in_proj]
  const uint16_t* xbc = nullptr;     // bf16 [rows, d_xbc]
  const float* a_log = nullptr;      // [H]
  const float* dt_bias = nullptr;    // [H]
  const float* D = nullptr;          // [H]
  float* state = nullptr;            // f32 [sequences, H, P, N]
  uint16_t* output = nullptr;        // bf16 [rows, d_inner]
  uint64_t sequences = 0, L = 0, H = 0, P = 0, N = 0, G = 0, d_inner = 0, d_xbc = 0, in_proj = 0;
  uint64_t dt_col = 0, b_col = 0, c_col = 0;
};
void launch_mamba2_recurrent(const Mamba2RecurrentLaunch& a, cudaStream_t stream);

// ---- shared geometry ----

// The state slice one block holds in shared memory: at most kMamba2SliceElems FP32 values
// (plus one pad column per row), at most kMamba2MaxSlice rows of P.
inline constexpr uint64_t kMamba2SliceElems = 2048;
inline constexpr uint64_t kMamba2MaxSlice = 64;

__host__ __device__ constexpr uint64_t mamba2_slice_rows(uint64_t P, uint64_t N) {
  const uint64_t by_state = N == 0 ? kMamba2MaxSlice : kMamba2SliceElems / N;
  const uint64_t rows = by_state < kMamba2MaxSlice ? by_state : kMamba2MaxSlice;
  const uint64_t capped = rows < P ? rows : P;
  return capped == 0 ? 1 : capped;
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS

#if defined(__CUDACC__) || defined(BUFFERLAB_CUDA_SIM)
// Device helpers shared by the Mamba-2 kernels (CUDA translation units only). min / max /
// clamps are written as std::min / std::max are (the first argument when the comparison is
// false), as the CPU kernels use them: a NaN propagates instead of being clamped away.
namespace bufferlab::BUFFERLAB_CUDA_NS::mamba2_device {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;

// silu(v) = v / (1 + e^−v), accurate expf and IEEE division.
__device__ inline float silu(float v) { return v / (1.0f + expf(-v)); }

// softplus(x) = x above the threshold 20, else log1p(exp(x)).
__device__ inline float softplus(float x) { return x > kSoftplusThreshold ? x : log1pf(expf(x)); }

// dt = min(max(softplus(dt_raw + dt_bias), 1e-9), 1e9) in the std::min / std::max form.
__device__ inline float step(float dt_raw, float dt_bias) {
  const float sp = softplus(__fadd_rn(dt_raw, dt_bias));
  const float lo = sp < kMamba2DtMin ? kMamba2DtMin : sp;
  return kMamba2DtMax < lo ? kMamba2DtMax : lo;
}

// min(x, 0) as std::min(x, 0.0f): NaN stays NaN.
__device__ inline float min0(float x) { return 0.0f < x ? 0.0f : x; }

}  // namespace bufferlab::BUFFERLAB_CUDA_NS::mamba2_device
#endif
