// Launchers of the CUDA Gated DeltaNet kernels (docs/spec/numerics.md §5, core ops/gdn.h):
//   gdn_conv.cu       causal conv1d + SiLU with the per-sequence tail update, the β/α gates,
//                     the gated RMSNorm
//   gdn_chunk.cu      the chunked core's three stages (C = 64, kd = vd = 128): W/U, the state
//                     pass, the output
//   gdn_recurrent.cu  the token-by-token recurrence (kd, vd ≤ kMaxGdnHeadDim)
// Arguments are device pointers already bound (bounds-checked) by the op descriptors and
// extents from op.shape(); the callers refuse what the kernels cannot hold (nk = 0, nv not a
// multiple of nk). Every launcher checks its launch and enqueues on `stream`. FP32 math with
// accurate expf / logf / log1pf, IEEE division and sqrtf (no fast-math intrinsics); every
// reduction runs in a fixed order (no atomics), so a result is the same bits run after run.
// Private to the CUDA backend.
#pragma once

#include "cuda_platform.h"

#include <cstdint>

namespace bufferlab::BUFFERLAB_CUDA_NS {

// ---- conv1d, gates, gated norm (gdn_conv.cu) ----

// out[t, c] = silu(Σ_{j<K} w[c, j]·x[t − (K−1) + j, c]) over `sequences` sequences of L rows;
// inputs before a sequence's first row come from its tail state. Then each sequence's tail
// becomes its last K−1 inputs (old tail entries shift in when L < K−1). Two kernels: the
// output reads the old tails, the tail update runs after it on the same stream.
struct GdnConvLaunch {
  const uint16_t* input = nullptr;   // bf16 [rows, row_stride]; channel c at column c
  const uint16_t* weight = nullptr;  // bf16 [channels, kernel]
  uint16_t* state = nullptr;         // bf16 [sequences, channels, kernel − 1]
  float* output = nullptr;           // f32 [rows, channels]
  uint64_t rows = 0, channels = 0, row_stride = 0, kernel = 0, sequences = 0, L = 0;
};
void launch_gdn_conv(const GdnConvLaunch& a, cudaStream_t stream);

// gates[t, h] = (β, α): β = 1/(1 + e^−b), α = exp(−exp(A_log[h])·softplus(a + dt_bias[h])).
struct GdnGatesLaunch {
  const uint16_t* ba = nullptr;  // bf16 [rows, 2nv]: [b | a]
  const float* a_log = nullptr;  // [nv]
  const float* dt_bias = nullptr;
  float* gates = nullptr;  // [rows, nv, 2]
  uint64_t rows = 0, nv = 0;
};
void launch_gdn_gates(const GdnGatesLaunch& a, cudaStream_t stream);

// In place per (row, head): y = ((o·r)·w)·silu(z), r = 1/sqrt(mean(o²) + eps), BF16 store.
struct GdnGatedNormLaunch {
  uint16_t* io = nullptr;            // bf16 [rows, heads·head_dim]
  const uint16_t* z = nullptr;       // bf16 [rows, z_row_stride]; Z at column z_col
  const uint16_t* weight = nullptr;  // bf16 [head_dim]
  uint64_t rows = 0, heads = 0, head_dim = 0, z_col = 0, z_row_stride = 0;
  float eps = 0.0f;
};
void launch_gdn_gated_norm(const GdnGatedNormLaunch& a, cudaStream_t stream);

// ---- chunked core (gdn_chunk.cu): C = 64, kd = vd = 128 ----

// One call's operands (ops/gdn.h GdnChunkOp::Bound) and extents. Region (b, c, v) =
// (b·cps + c)·nv + v; stream b's chunk c covers rows b·L + c·64 .. + min(64, L − c·64).
struct GdnChunkLaunch {
  const float* conv = nullptr;   // f32 [streams·L, conv_dim]: [Q | K | V]
  const float* gates = nullptr;  // f32 [streams·L, nv, 2]
  uint16_t* W = nullptr;         // bf16 regions [64][128]
  uint16_t* U = nullptr;         // bf16 regions [64][128]
  uint16_t* S = nullptr;         // bf16 regions [128][128]
  uint16_t* uc = nullptr;        // bf16 regions [64][128]
  float* gc = nullptr;           // f32 regions [64]
  float* state = nullptr;        // f32 [streams, nv, 128, 128]
  uint16_t* output = nullptr;    // bf16 [streams·L, nv·128]
  uint64_t streams = 0, L = 0, chunks_per_stream = 0, nk = 0, nv = 0, conv_dim = 0;
  float q_scale = 0.0f;     // (float)(1/sqrt(kd))
  bool carry_bf16 = false;  // kernel mutant M-GDNCARRY: the state pass carries BF16 snapshots
};
// One block per region: gc, then W and U by forward substitution (FP32, stored BF16).
void launch_gdn_chunk_wu(const GdnChunkLaunch& a, cudaStream_t stream);
// One block per (stream, value head, 32-column slice of vd), sequential over the chunks.
void launch_gdn_chunk_state(const GdnChunkLaunch& a, cudaStream_t stream);
// One block per region: O from the stored S snapshot, uc and gc.
void launch_gdn_chunk_output(const GdnChunkLaunch& a, cudaStream_t stream);

// ---- recurrence (gdn_recurrent.cu) ----

// `sequences` sequences of L rows; per value head δ = β(v − α·Sᵀk), S = α·S + k·δᵀ,
// o = Sᵀq → BF16. kd, vd ≤ kMaxGdnHeadDim.
struct GdnRecurrentLaunch {
  const float* conv = nullptr;   // f32 [rows, conv_dim]
  const float* gates = nullptr;  // f32 [rows, nv, 2]
  float* state = nullptr;        // f32 [sequences, nv, kd, vd]
  uint16_t* output = nullptr;    // bf16 [rows, nv·vd]
  uint64_t sequences = 0, L = 0, nk = 0, kd = 0, nv = 0, vd = 0, conv_dim = 0;
  float q_scale = 0.0f;  // (float)(1/sqrt(kd))
};
void launch_gdn_recurrent(const GdnRecurrentLaunch& a, cudaStream_t stream);

}  // namespace bufferlab::BUFFERLAB_CUDA_NS

#if defined(__CUDACC__) || defined(BUFFERLAB_CUDA_SIM)
// Device helpers shared by the GDN kernels (CUDA translation units only).
namespace bufferlab::BUFFERLAB_CUDA_NS::gdn_device {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;

// The sum over the warp, in the same butterfly order on every lane: each lane ends with the
// same bits (a + b == b + a), and a run repeats them.
__device__ inline float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// 1/sqrt(Σx² + kGdnL2Eps) of one q or k head row (`n` values at `x`), on every lane of the
// calling warp: lane l sums x[l], x[l + 32], ... in order, then the butterfly.
__device__ inline float l2_inverse_norm(const float* x, int n, float eps) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  float s = 0.0f;
  for (int i = lane; i < n; i += kWarpSize) s += x[i] * x[i];
  s = warp_sum(s);
  return 1.0f / sqrtf(s + eps);
}

// σ(z) = 1/(1 + e^−z) and silu(v) = v/(1 + e^−v): accurate expf, IEEE division.
__device__ inline float sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }
__device__ inline float silu(float v) { return v / (1.0f + expf(-v)); }

// log max(α, floor) with a NaN α staying NaN (ops/gdn.h: non-finite inputs propagate;
// fmaxf would turn a NaN into the floor).
__device__ inline float log_alpha(float alpha, float floor) {
  return logf(alpha < floor ? floor : alpha);
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS::gdn_device
#endif
