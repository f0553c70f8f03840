// Launchers of the CUDA attention kernels (docs/spec/attention.md, docs/spec/numerics.md §8;
// the top comment of core ops/attention.h pins every formula, order, rounding and layout):
//   attention_stage.cu  the prefill staging copies (Q copy, K / V scratch) and the cache write
//   attention_core.cu   the prefill and decode / verify cores (one split or split-K partials)
//   attention_merge.cu  the split-K merge and the sigmoid output gate
// Arguments are device pointers already bound (bounds-checked) by the op descriptors and
// extents from op.shape(); `mutant` selects a kernel mutant's instantiation (the attention
// mutants of docs/spec/bug-catalogue.md; template parameters, so the real kernels' code and
// registers are what they were), Mutant::none the real one; the host entry points
// (attention_ops.cpp) refuse what the kernels cannot address. Every launcher checks its launch and
// enqueues on `stream`. FP32 math, accurate expf / cosf / sinf, IEEE sqrt and division, every
// reduction in a fixed order: a row's bits depend on its own position and data only
// (docs/spec/attention.md §4).
#pragma once

#include "cuda_platform.h"

#include <cstdint>

#include "bufferlab/core/ops/attention.h"
#include "bufferlab/core/sizing.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {

// The constants of the stage function S(x, positions) (ops/attention.h): qk_norm with `norm`
// (null: none), then RoPE on the first rd dimensions from the table [rd/2 + 1].
struct AttnStageArgs {
  const float* rope = nullptr;          // f32 [rd/2 + 1]: inv_freq, then the attention factor
  const uint16_t* norm = nullptr;       // bf16 [hd] (qk_norm), else null
  const uint32_t* positions = nullptr;  // u32 [streams, pos_stride]
  uint64_t pos_stride = 0;
  uint32_t hd = 0, rd = 0;
  uint32_t sec0 = 0, sec1 = 0, sec2 = 0;  // MRoPE sections
  bool interleaved = false, mrope = false, mrope_interleaved = false;
  float eps = 0.0f;
};

// ---- staging and cache write (attention_stage.cu) ----

// One warp per (row, head): rows < tokens get S of the source head (staged) or a copy (V);
// rows tokens..rows−1 (phantom) get zeros.
struct AttnStageLaunch {
  const uint16_t* src = nullptr;  // bf16 [tokens, src_stride], the part's column 0 at col0
  uint16_t* dst = nullptr;        // bf16 [rows, heads·hd]
  uint64_t tokens = 0, rows = 0, heads = 0, src_stride = 0, col0 = 0;
  bool staged = false;
  AttnStageArgs stage;
};
void launch_attn_stage(const AttnStageLaunch& a, cudaStream_t stream,
                       Mutant mutant = Mutant::none);  // M-MROPE

// One warp per (row, KV head): slot = slots[row]; a slot outside [0, cache_slots) skips the
// row. K from k_src (+ k_col0) through S when `staged` (qkv source), else copied; V copied.
struct AttnCacheWriteLaunch {
  const uint16_t* k_src = nullptr;  // row i at i·src_stride
  const uint16_t* v_src = nullptr;
  uint64_t src_stride = 0, k_col0 = 0, v_col0 = 0;
  const int64_t* slots = nullptr;
  uint16_t* k_cache = nullptr;  // bf16 [cache_slots, nkv, hd]
  uint16_t* v_cache = nullptr;
  uint64_t rows = 0, nkv = 0, cache_slots = 0;
  bool staged = false;
  AttnStageArgs stage;
};
void launch_attn_cache_write(const AttnCacheWriteLaunch& a, cudaStream_t stream,
                             Mutant mutant = Mutant::none);  // M-MROPE

// ---- the cores (attention_core.cu) ----

// The paged cache as the cores read it: key j of a sequence with block-table row `table` lives
// at slot table[j / block_size]·block_size + j % block_size; an entry outside
// [0, num_blocks) or a logical block ≥ max_blocks makes the key invisible (never read).
struct AttnCacheView {
  const uint16_t* k = nullptr;  // bf16 [num_blocks·block_size, nkv, hd]
  const uint16_t* v = nullptr;
  const int32_t* block_table = nullptr;  // [sequences, max_blocks]
  uint64_t block_size = 0, num_blocks = 0, max_blocks = 0;
};

// One 64-thread block per (query row, head). Stream b = row / L, p = ctx_lens[b] + row % L;
// keys < ctx_lens[b] from the cache, the others from the scratch rows b·L + (j − ctx_lens[b]).
struct AttnPrefillLaunch {
  const uint16_t* q = nullptr;  // bf16 [rows, nq·hd], staged
  const uint16_t* k = nullptr;  // bf16 [tokens, nkv·hd]
  const uint16_t* v = nullptr;
  const int32_t* ctx_lens = nullptr;  // [streams]
  AttnCacheView cache;
  const float* sinks = nullptr;  // [nq] or null
  uint16_t* out = nullptr;       // bf16 [rows, nq·hd]
  uint64_t rows = 0, L = 0, nq = 0, nkv = 0, hd = 0, window = 0;
  float scale = 0.0f;  // fp32(1/sqrt(hd))
};
// `mutant`: M-CAUSAL, M-GQA, M-BLOCK, M-SINK.
void launch_attn_prefill(const AttnPrefillLaunch& a, cudaStream_t stream,
                         Mutant mutant = Mutant::none);

// Two kernels: first S of each live row's Q head into the row's own output (one split) or split
// slots (split-K), then one 64-thread block per (row, head, split) reads it back and reduces
// the keys; p = seq_lens[row] − 1; rows ≥ live write zeros and read nothing.
struct AttnDecodeLaunch {
  const uint16_t* qkv = nullptr;  // bf16 [rows, qkv_dim]: Q of head h at column h·hd
  const int32_t* seq_lens = nullptr;
  AttnCacheView cache;
  const float* sinks = nullptr;  // one split with sinks, else null
  uint16_t* out = nullptr;       // one split: bf16 [rows, nq·hd]
  float* partials = nullptr;     // split-K: f32 [rows, nq, splits, hd + 2]
  uint64_t rows = 0, live = 0, qkv_dim = 0, nq = 0, nkv = 0, hd = 0, window = 0, splits = 1;
  float scale = 0.0f;
  AttnStageArgs stage;  // the query's stage function (q_norm)
};
// `mutant`: M-CAUSAL, M-GQA, M-BLOCK, M-MROPE, M-SINK.
void launch_attn_decode(const AttnDecodeLaunch& a, cudaStream_t stream,
                        Mutant mutant = Mutant::none);

// ---- merge and gate (attention_merge.cu) ----

// One thread per (row, head, d): the merge of ops/attention.h; rows ≥ live write zeros.
struct SplitKMergeLaunch {
  const float* partials = nullptr;  // f32 [rows, nq, splits, hd + 2]
  const float* sinks = nullptr;     // [nq] or null
  uint16_t* out = nullptr;          // bf16 [rows, nq·hd]
  uint64_t rows = 0, live = 0, nq = 0, hd = 0, splits = 0;
};
// `mutant`: M-MERGE, M-SINK.
void launch_splitk_merge(const SplitKMergeLaunch& a, cudaStream_t stream,
                         Mutant mutant = Mutant::none);

// One thread per element: attn = bf16(attn · (1 / (1 + expf(−gate)))), in place.
struct AttnGateLaunch {
  const uint16_t* qkv = nullptr;  // bf16 [rows, qkv_dim]; the gate at column gate_col0
  uint16_t* attn = nullptr;       // bf16 [rows, width]
  uint64_t rows = 0, width = 0, qkv_dim = 0, gate_col0 = 0;
};
void launch_attn_gate(const AttnGateLaunch& a, cudaStream_t stream);

}  // namespace bufferlab::BUFFERLAB_CUDA_NS

#if defined(__CUDACC__) || defined(BUFFERLAB_CUDA_SIM)
#include "bufferlab/core/number_formats.h"

// The stage function of ops/attention.h, shared by the staging copies, the cache write and the
// decode core (CUDA translation units only): one definition, every rounding spelled out, so a
// token's staged and decoded Q / K agree bit for bit.
namespace bufferlab::BUFFERLAB_CUDA_NS::attn_device {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;

__device__ inline float bf(uint16_t b) { return bf16_bits_to_f32(b); }

// inv = 1 / sqrtf(Σ_i x_i² / hd + eps), the sum in FP32 with i ascending (each x_i² of a BF16
// value is exact in FP32, so only the sums round). Sequential by design: the order is pinned.
__device__ inline float stage_inv_rms(const uint16_t* x, const AttnStageArgs& a) {
  float ss = 0.0f;
  for (uint32_t i = 0; i < a.hd; ++i) {
    const float v = bf(x[i]);
    ss = __fadd_rn(ss, __fmul_rn(v, v));
  }
  return 1.0f / sqrtf(__fadd_rn(ss / static_cast<float>(a.hd), a.eps));
}

// sin(θ) and cos(θ) of an FP32 angle, each within 1 ulp (inside the 2 ulp CUDA documents for
// cosf / sinf, the bound docs/spec/attention.md §2 judges by; never the __sinf intrinsics).
// Not CUDA's sinf / cosf / sincosf: their large-argument reduction keeps a 7-word array that
// ptxas places in local memory in these kernels (32 bytes of stack, which the build refuses)
// or not, depending on what else the kernel holds. This one needs no array, and it is the same
// code and the same bits on the device and on the simulator:
//   - reduction: k = rint(θ·2/π), r = θ − k·π/2 in FP64 with π/2 = P1 + … + P6, each P_i of at
//     most 21 significant bits, so every k·P_i is exact for |k| < 2^32 (|θ| < 6.7e9; RoPE's
//     θ = pos·inv_freq stays below it for u32 positions and inv_freq ≤ 1.5). θ − k·P1 and the
//     next difference are exact (both operands on a common grid, the result under 53 bits);
//     later differences round with a relative error of 2^-53 of a value within
//     k·(P4 + …) ≤ 2^-29 of r, the remainder of π/2 past P6 adds < 2^-88: r's relative error
//     stays below 2^-40 even for the smallest |r| an FP32 θ of this range reaches (≈ 2^-30).
//   - sin r, cos r on |r| ≤ π/4 (+ the rounding of k): Taylor polynomials through r^17 and
//     r^16 (the next terms are below 2^-62 and 2^-57), FP64 Horner with explicit fma, so no
//     compiler contraction changes a bit: error a few 2^-53.
//   - the quadrant k mod 4 picks ±sin r / ±cos r; one rounding to FP32 then gives an error
//     of 0.5 ulp plus under 2^-15 ulp: below 1 ulp.
// A non-finite θ gives NaN, as cosf does.
__device__ inline void rope_sincos(float theta, float& s, float& c) {
  const double t = theta;
  if (!(fabs(t) < 6.7e9)) {  // NaN, inf, or past the exact reduction: NaN
    s = c = __int_as_float(0x7fffffff);
    return;
  }
  const double k = rint(t * 0.63661977236758138);
  double r = t - k * 0x1.921fap+0;  // exact: see above
  r -= k * 0x1.54442p-20;
  r -= k * 0x1.a308cp-41;
  r -= k * 0x1.31318p-61;
  r -= k * 0x1.8a2ep-81;
  r -= k * 0x1.b838p-104;
  const double r2 = r * r, r3 = r2 * r;
  // sin r = r + r^3·(−1/3! + r^2·(1/5! − …)); cos r = 1 + r^2·(−1/2! + r^2·(1/4! − …)).
  double ps = 1.0 / 355687428096000.0;  // 1/17!
  ps = fma(ps, r2, -1.0 / 1307674368000.0);
  ps = fma(ps, r2, 1.0 / 6227020800.0);
  ps = fma(ps, r2, -1.0 / 39916800.0);
  ps = fma(ps, r2, 1.0 / 362880.0);
  ps = fma(ps, r2, -1.0 / 5040.0);
  ps = fma(ps, r2, 1.0 / 120.0);
  ps = fma(ps, r2, -1.0 / 6.0);
  const double sin_r = fma(r3, ps, r);
  double pc = 1.0 / 20922789888000.0;  // 1/16!
  pc = fma(pc, r2, -1.0 / 87178291200.0);
  pc = fma(pc, r2, 1.0 / 479001600.0);
  pc = fma(pc, r2, -1.0 / 3628800.0);
  pc = fma(pc, r2, 1.0 / 40320.0);
  pc = fma(pc, r2, -1.0 / 720.0);
  pc = fma(pc, r2, 1.0 / 24.0);
  pc = fma(pc, r2, -0.5);
  const double cos_r = fma(r2, pc, 1.0);
  switch (static_cast<int64_t>(k) & 3) {
    case 0:
      s = static_cast<float>(sin_r);
      c = static_cast<float>(cos_r);
      return;
    case 1:
      s = static_cast<float>(cos_r);
      c = static_cast<float>(-sin_r);
      return;
    case 2:
      s = static_cast<float>(-sin_r);
      c = static_cast<float>(-cos_r);
      return;
    default:
      s = static_cast<float>(-cos_r);
      c = static_cast<float>(sin_r);
      return;
  }
}

// The position stream of frequency i (docs/spec/attention.md §2): 0 = t, 1 = h, 2 = w.
__device__ inline uint32_t rope_stream(uint32_t i, const AttnStageArgs& a) {
  if (!a.mrope) return 0;
  if (a.mrope_interleaved) {
    if (i % 3 == 1 && i < 3 * a.sec1) return 1;
    if (i % 3 == 2 && i < 3 * a.sec2) return 2;
    return 0;
  }
  if (i < a.sec0) return 0;
  if (i < a.sec0 + a.sec1) return 1;
  if (i < a.sec0 + a.sec1 + a.sec2) return 2;
  return 0;
}

// n_d: (x_d · inv) · (1 + w_d) with qk_norm, else x_d (FP32).
__device__ inline float stage_normed(const uint16_t* x, uint32_t d, float inv,
                                     const AttnStageArgs& a) {
  const float v = bf(x[d]);
  if (a.norm == nullptr) return v;
  return __fmul_rn(__fmul_rn(v, inv), __fadd_rn(1.0f, bf(a.norm[d])));
}

// A destination of the stage function: BF16 bits to a global row. (The decode query also goes
// to FP32 split slots: attention_core.cu.)
struct StageToBf16 {
  uint16_t* row;
  __device__ void put(uint32_t d, uint16_t bits) const { row[d] = bits; }
};

// S(x, positions of `token`) of one head row x, by the 32 lanes of a converged warp: lane 0
// forms the qk_norm factor (the pinned sequential sum) and shuffles it out; the lanes then take
// the units — rotary pairs i < rd/2, then the pass-through dimensions — in strides of 32.
// Every output is one BF16 rounding of its own FP32 expression: no value depends on the lane
// that computes it. SwapHW is kernel mutant M-MROPE: the h and w position streams exchanged.
template <bool SwapHW = false, class Dst>
__device__ inline void stage_head(const uint16_t* x, uint64_t token, const AttnStageArgs& a,
                                  int lane, const Dst& dst) {
  float inv = 1.0f;
  if (a.norm != nullptr) {
    if (lane == 0) inv = stage_inv_rms(x, a);
    inv = __shfl_sync(kFullMask, inv, 0);
  }
  const uint32_t half = a.rd / 2, units = a.hd - half;
  const float af = a.rope[half];
  for (uint32_t u = static_cast<uint32_t>(lane); u < units; u += kWarpSize) {
    if (u >= half) {  // pass-through: n_d unchanged
      const uint32_t d = a.rd + (u - half);
      dst.put(d, f32_to_bf16_bits(stage_normed(x, d, inv, a)));
      continue;
    }
    const uint32_t d0 = a.interleaved ? 2 * u : u;
    const uint32_t d1 = a.interleaved ? 2 * u + 1 : u + half;
    const float x0 = stage_normed(x, d0, inv, a), x1 = stage_normed(x, d1, inv, a);
    uint32_t stream = rope_stream(u, a);
    if constexpr (SwapHW) stream = stream == 1 ? 2 : stream == 2 ? 1 : stream;
    const uint32_t pos = a.positions[stream * a.pos_stride + token];
    const float theta = __fmul_rn(static_cast<float>(pos), a.rope[u]);
    float sin_t = 0.0f, cos_t = 0.0f;
    rope_sincos(theta, sin_t, cos_t);
    const float c = __fmul_rn(cos_t, af), s = __fmul_rn(sin_t, af);
    dst.put(d0, f32_to_bf16_bits(__fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s))));
    dst.put(d1, f32_to_bf16_bits(__fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s))));
  }
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS::attn_device
#endif
