// CUDA mHC pre step (Sinkhorn form) and head (docs/spec/numerics.md §3, ops/mhc.h): one block of
// 256 threads per TB tokens (TB = 1, or 4 for large batches so the fn rows each load serve
// four tokens). Per token, the flattened hc·h vector x:
//
//   pass 1   max|x| and "holds a NaN / ±Inf" (block reductions) → s = max(1, 2^e);
//   pass 2   Σ(x/s)² and the mix GEMV Σ_k fn[m, k]·(x_k/s) for the mix rows, in chunks of
//            kRowChunk rows (one chunk for hc ≤ 4: mix = 24) — x is streamed once per chunk;
//            every thread keeps kRowChunk FP32 accumulators for ITS token: the thread mapping
//            is lane = kk·TB + token, so the TB lanes sharing a k read the same fn element
//            (one broadcast load) and neighbouring k are contiguous per token;
//            partial sums reduce by warp butterflies over the k lanes of a token, then over
//            the 8 warps in warp order (a fixed order: the result is deterministic);
//   per-token steps, 16 threads per token (thread (token, i), i < hc):
//            rs = 1/sqrt(Σ(x/s)²/(hc·h) + eps/s²) (IEEE sqrt and division, not the 2-ulp
//            rsqrtf) and mix_m = rs·dot_m (= r·(fn·x) exactly, r = rs/s);
//            pre_i = σ(mix_i·s0 + b_i) + hc_eps; post_i = 2σ(mix_{hc+i}·s1 + b_{hc+i});
//            row i of comb: logits, max-subtracted softmax (expf) + hc_eps; then the
//            Sinkhorn in shared memory: thread i normalises row i, thread j column j, each
//            sum taken sequentially in index order, IEEE division, __syncthreads between
//            half steps: column /(hc_eps + Σ_i), (iters − 1)× [row /(hc_eps + Σ_j), column
//            /(hc_eps + Σ_i)] (column before row under M-SKORDER), final exact column
//            normalisation /Σ_i (skipped under M-SKCOL);
//   pass 3   out[d] = bf16(Σ_i pre_i·x[i, d]) (sequential i, fmaf), every thread over d.
//
// The scalar per-token steps use __fmul_rn / __fadd_rn so each spec operation is rounded
// once, as written (no FMA contraction). A token with a non-finite value writes NaN to every
// output (post, comb, out) and adds 1 to the counter; tokens never share a reduction.
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
constexpr int kMaxMix = (2 + kMaxMhc) * kMaxMhc;
constexpr int kRowChunk = 24;  // mix rows per pass over x: all of them for hc ≤ 4
// Tokens per block for large batches (fn reuse); small batches use one (more blocks).
constexpr int kBatchedTokens = 4;
constexpr uint64_t kBatchedFromRows = 1024;

static_assert(kBatchedTokens * kMaxMhc <= kThreads, "one thread per (token, stream)");
static_assert(kBatchedTokens * kRowChunk <= kThreads,
              "one thread per (token, chunk row) in the cross-warp reduction");

template <int TB>
struct MixShared {
  float mix[TB][kMaxMix];             // dot_m = Σ fn[m]·(x/s), then scaled by rs
  float part[kWarps][TB][kRowChunk];  // per-warp partial dots of a chunk
  float part_sumsq[kWarps][TB];
  float part_max[kWarps][TB];
  int part_bad[kWarps][TB];
  float inv_scale[TB];  // 1/s
  float rs[TB];         // 1/sqrt(Σ(x/s)²/n + eps/s²)
  int bad[TB];          // the token holds a NaN / ±Inf
  float pre[TB][kMaxMhc];
  float comb[TB][kMaxMhc][kMaxMhc + 1];  // padded rows: row and column walks avoid conflicts
};

// Sum / max / or over the lanes of one token (lanes differing in the bits ≥ log2 TB): a
// butterfly, so every lane ends with the same bits.
template <int TB>
__device__ float token_lanes_sum(float v) {
  for (int offset = TB; offset < kWarpSize; offset *= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}
template <int TB>
__device__ float token_lanes_max(float v) {
  for (int offset = TB; offset < kWarpSize; offset *= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}
template <int TB>
__device__ int token_lanes_or(int v) {
  for (int offset = TB; offset < kWarpSize; offset *= 2) v |= __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// Column j of the token's comb: c_ij /= (eps + Σ_i c_ij) (with_eps) or /= Σ_i c_ij.
__device__ void normalise_column(float (*c)[kMaxMhc + 1], int j, int hc, float eps, bool with_eps) {
  float sum = 0.0f;
  for (int i = 0; i < hc; ++i) sum = __fadd_rn(sum, c[i][j]);
  const float d = with_eps ? __fadd_rn(eps, sum) : sum;
  for (int i = 0; i < hc; ++i) c[i][j] = c[i][j] / d;
}

// Row i: c_ij /= (eps + Σ_j c_ij).
__device__ void normalise_row(float (*c)[kMaxMhc + 1], int i, int hc, float eps) {
  float sum = 0.0f;
  for (int j = 0; j < hc; ++j) sum = __fadd_rn(sum, c[i][j]);
  const float d = __fadd_rn(eps, sum);
  for (int j = 0; j < hc; ++j) c[i][j] = c[i][j] / d;
}

template <int TB>
__global__ void __launch_bounds__(kThreads) mhc_mix_kernel(MhcMixLaunch a) {
  BL_SHARED(MixShared<TB>, sh);
  constexpr int kLanesPerToken = kWarpSize / TB;  // k lanes of one token in a warp
  constexpr int kStep = kThreads / TB;            // k lanes of one token in the block
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int tok = lane % TB;
  const uint64_t kk = static_cast<uint64_t>(warp * kLanesPerToken + lane / TB);
  const uint64_t t0 = static_cast<uint64_t>(blockIdx.x) * TB;
  const uint64_t hc = a.hc, h = a.h, W = hc * h;
  const int mix = static_cast<int>(a.head ? hc : (2 + hc) * hc);
  const bool valid = t0 + tok < a.rows;
  const float* x = a.streams + (valid ? (t0 + tok) * W : 0);

  // Pass 1: max|x| and the non-finite flag of each token.
  float max_abs = 0.0f;
  int bad = 0;
  if (valid) {
    for (uint64_t k = kk; k < W; k += kStep) {
      const float v = x[k];
      bad |= isfinite(v) ? 0 : 1;
      max_abs = fmaxf(max_abs, fabsf(v));
    }
  }
  max_abs = token_lanes_max<TB>(max_abs);
  bad = token_lanes_or<TB>(bad);
  if (lane < TB) {
    sh.part_max[warp][lane] = max_abs;
    sh.part_bad[warp][lane] = bad;
  }
  __syncthreads();
  if (tid < TB) {
    float m = 0.0f;
    int b = 0;
    for (int w = 0; w < kWarps; ++w) {
      m = fmaxf(m, sh.part_max[w][tid]);
      b |= sh.part_bad[w][tid];
    }
    const bool here = t0 + tid < a.rows;
    sh.bad[tid] = here ? b : 0;
    sh.inv_scale[tid] = b ? 1.0f : inverse_scale(m);
    if (here && b) atomicAdd(a.nonfinite, 1ull);
  }
  __syncthreads();

  // Pass 2: Σ(x/s)² and the mix dots, kRowChunk rows per pass over x.
  const float inv_s = sh.inv_scale[tok];
  float sumsq = 0.0f;
  for (int c0 = 0; c0 < mix; c0 += kRowChunk) {
    const int rows_here = mix - c0 < kRowChunk ? mix - c0 : kRowChunk;
    float acc[kRowChunk];
#pragma unroll
    for (int m = 0; m < kRowChunk; ++m) acc[m] = 0.0f;
    const float* f = a.fn + static_cast<uint64_t>(c0) * W;
    if (valid) {
      for (uint64_t k = kk; k < W; k += kStep) {
        const float v = x[k] * inv_s;  // exact: a power of two
        if (c0 == 0) sumsq = fmaf(v, v, sumsq);
#pragma unroll
        for (int m = 0; m < kRowChunk; ++m)
          if (m < rows_here) acc[m] = fmaf(f[static_cast<uint64_t>(m) * W + k], v, acc[m]);
      }
    }
#pragma unroll
    for (int m = 0; m < kRowChunk; ++m) acc[m] = token_lanes_sum<TB>(acc[m]);
    if (c0 == 0) sumsq = token_lanes_sum<TB>(sumsq);
    if (lane < TB) {
#pragma unroll
      for (int m = 0; m < kRowChunk; ++m) sh.part[warp][lane][m] = acc[m];
      if (c0 == 0) sh.part_sumsq[warp][lane] = sumsq;
    }
    __syncthreads();
    if (tid < TB * kRowChunk) {
      const int t = tid / kRowChunk, m = tid % kRowChunk;
      if (m < rows_here) {
        float s = 0.0f;
        for (int w = 0; w < kWarps; ++w) s += sh.part[w][t][m];
        sh.mix[t][c0 + m] = s;
      }
    }
    if (c0 == 0 && tid < TB) {
      float s = 0.0f;
      for (int w = 0; w < kWarps; ++w) s += sh.part_sumsq[w][tid];
      const float is = sh.inv_scale[tid];
      const float eps_scaled = __fmul_rn(__fmul_rn(a.rms_eps, is), is);  // eps/s²
      sh.rs[tid] = 1.0f / sqrtf(__fadd_rn(s / static_cast<float>(W), eps_scaled));
    }
    __syncthreads();
  }

  // Per-token steps: thread (token p, stream i).
  const int p = tid / kMaxMhc, i = tid % kMaxMhc;
  const int nhc = static_cast<int>(hc);
  const bool on = tid < TB * kMaxMhc && i < nhc && t0 + p < a.rows;
  const uint64_t tp = t0 + p;
  float(*c)[kMaxMhc + 1] = sh.comb[on ? p : 0];
  if (on) {
    const float rs = sh.rs[p];
    const float* dots = sh.mix[p];
    const auto mixed = [&](int m) { return __fmul_rn(rs, dots[m]); };
    const auto affine = [&](int m, float s) {
      return __fadd_rn(__fmul_rn(mixed(m), s), a.bias[m]);
    };
    sh.pre[p][i] = __fadd_rn(sigmoid(affine(i, a.scale[0])), a.hc_eps);
    if (!a.head) {
      const float post = 2.0f * sigmoid(affine(nhc + i, a.scale[1]));
      a.post[tp * hc + i] = sh.bad[p] ? quiet_nan() : post;
      // Row i of the comb logits: max-subtracted softmax + hc_eps.
      const int row0 = 2 * nhc + i * nhc;
      float m = -INFINITY;
      for (int j = 0; j < nhc; ++j) {
        const float l = affine(row0 + j, a.scale[2]);
        c[i][j] = l;
        m = fmaxf(m, l);
      }
      float sum = 0.0f;
      for (int j = 0; j < nhc; ++j) {
        const float e = expf(c[i][j] - m);
        c[i][j] = e;
        sum = __fadd_rn(sum, e);
      }
      for (int j = 0; j < nhc; ++j) c[i][j] = __fadd_rn(c[i][j] / sum, a.hc_eps);
    }
  }
  __syncthreads();
  if (!a.head) {
    // Sinkhorn: thread i owns row i and column i of its token's matrix.
    if (on) normalise_column(c, i, nhc, a.hc_eps, true);
    __syncthreads();
    for (uint64_t it = 1; it < a.iters; ++it) {
      if (a.column_first) {  // M-SKORDER
        if (on) normalise_column(c, i, nhc, a.hc_eps, true);
        __syncthreads();
        if (on) normalise_row(c, i, nhc, a.hc_eps);
        __syncthreads();
        continue;
      }
      if (on) normalise_row(c, i, nhc, a.hc_eps);
      __syncthreads();
      if (on) normalise_column(c, i, nhc, a.hc_eps, true);
      __syncthreads();
    }
    if (!a.skip_final_column) {
      if (on) normalise_column(c, i, nhc, a.hc_eps, false);
      __syncthreads();
    }
    if (on) {
      float* row = a.comb + (tp * hc + i) * hc;
      for (int j = 0; j < nhc; ++j) row[j] = sh.bad[p] ? quiet_nan() : c[i][j];
    }
  }

  // Pass 3: out[t, d] = bf16(Σ_i pre_i·x[t, i, d]).
  for (int q = 0; q < TB; ++q) {
    const uint64_t t = t0 + q;
    if (t >= a.rows) break;
    const float* xt = a.streams + t * W;
    uint16_t* out = a.out + t * h;
    const bool nan_out = sh.bad[q] != 0;
    for (uint64_t d = static_cast<uint64_t>(tid); d < h; d += kThreads) {
      float y = 0.0f;
      for (int s = 0; s < nhc; ++s) y = fmaf(sh.pre[q][s], xt[static_cast<uint64_t>(s) * h + d], y);
      out[d] = f32_to_bf16_bits(nan_out ? quiet_nan() : y);
    }
  }
}

template <int TB>
void launch(const MhcMixLaunch& a, cudaStream_t stream) {
  const uint64_t blocks = (a.rows + TB - 1) / TB;
  if (blocks > 0x7FFFFFFFull)
    throw Error("hc_pre: " + std::to_string(a.rows) + " rows exceed the grid limit");
  BL_LAUNCH(mhc_mix_kernel<TB>, static_cast<unsigned>(blocks), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_mhc_mix(const MhcMixLaunch& a, cudaStream_t stream) {
  if (a.rows == 0 || a.h == 0) return;
  if (a.hc == 0 || a.hc > kMaxMhcMult)
    throw Error("hc_pre: hc = " + std::to_string(a.hc) +
                " outside [1, kMaxHcMult = " + std::to_string(kMaxMhcMult) + "]");
  if (a.rows >= kBatchedFromRows)
    launch<kBatchedTokens>(a, stream);
  else
    launch<1>(a, stream);
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
