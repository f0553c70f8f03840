// The mHC hyper-connection ops (docs/spec/numerics.md §3–§4, docs/spec/buffers.md §4.7, §5): expand
// the embedding into hc FP32 streams, the pre step (Sinkhorn form, or the low-rank form on
// its split or GEMM path) that writes the block input into norm_output, the post step that
// updates the streams in place, and the head before the final norm.
//
// Every op binds its operands through bind(ws): typed addresses, each checked to hold exactly
// the elements shape() says; backends launch from these and re-derive no extent.
//
// Flattened / per-stream RMS (pre, head, low-rank norm) is defined for huge streams: kernels
// scale the values by s = max(1, 2^e) (max|x| = m·2^e, m in [0.5, 1)) before squaring, which
// is exact, and compute r·x as rs·(x/s) with rs = 1/sqrt(Σ(x/s)²/n + eps/s²), so nothing
// overflows while x is finite (bit-identical to the plain formula when max|x| < 1). The
// maximum is over the token's flattened hc·h vector in pre and head, over each stream's h
// values in the low-rank norm (one huge stream does not flush the others). A token with a
// non-finite stream value writes NaN to every output of that token (post, comb, block input,
// normed, ...) and is counted in MhcDiagnostics — by pre, head and the low-rank norm stage;
// the later low-rank stages propagate the NaN and count nothing. Other tokens are untouched.
//
// Left to the kernels (covered by the oracle's γ bounds, not pinned): summation order, FMA
// contraction in sums, and batch invariance (a token's result may differ by a few ULPs with
// the batch size on CUDA, which blocks 4 tokens from 1024 rows). Pinned: "(1/hc)·Σ" multiplies
// by the FP32 reciprocal, "/hc" divides. Refused with an Error: hc = 0 or hc > kMaxMhcMult, and
// hc_sinkhorn_iters = 0 ("(iters − 1) times" is undefined; config validation rejects it too).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab {

// The largest hc_mult a kernel handles (docs/spec/numerics.md §3: up to 16, 4 in real models): the
// per-token matrices (hc×hc comb, the (2 + hc)·hc mix vector) live in fixed-size registers
// / stack arrays. Backends refuse a launch beyond it with an Error.
inline constexpr uint64_t kMaxMhcMult = 16;

// Every stream = the embedding row: hidden_states bf16 [rows, h] "@x" → hc_streams f32
// [rows, hc, h] "@hc".
struct MhcExpandOp {
  struct Shape {
    uint64_t rows = 0, hc = 0, h = 0;
  };
  Shape dims;
  TensorRef input, streams;

  static MhcExpandOp make(const ModelConfig& config, uint64_t rows);

  struct Bound {
    const uint16_t* input = nullptr;  // bf16 [rows, h]
    float* streams = nullptr;         // f32 [rows, hc, h]
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "hc_expand"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Per-call diagnostic of a pre / head / low-rank norm launch: tokens whose streams held a
// NaN or ±Inf (their outputs are NaN by definition).
struct MhcDiagnostics {
  uint64_t nonfinite_tokens = 0;
};

// Sinkhorn-form pre step (docs/spec/numerics.md §3, steps 1–5): per token the mix vector, pre/post
// weights and the Sinkhorn-normalised comb matrix, and the block input Σ pre_i x_i.
//   fn    f32 [mix, hc·h]   mixing weights, mix = (2 + hc)·hc rows [pre | post | comb]
//   scale f32 [3]           s0 (pre), s1 (post), s2 (comb)
//   bias  f32 [mix]
//   post  f32 [rows, hc]    → hc_post;  comb f32 [rows, hc, hc] (comb_ij at [t, i, j]) → hc_comb
//   block_in bf16 [rows, h] → norm_output
// rms_eps is the model's rms_norm_eps; hc_eps and iters the Sinkhorn's (docs/spec/numerics.md §3
// step 4). Kernel mutant M-SKCOL skips the final exact column normalisation; M-SKORDER normalises
// the columns before the rows inside the loop.
struct MhcPreOp {
  struct Shape {
    uint64_t rows = 0, hc = 0, h = 0, mix = 0, iters = 0;
  };
  Shape dims;
  double rms_eps = 1e-6, hc_eps = 1e-6;
  TensorRef streams, fn, scale, bias, post, comb, block_in;

  static MhcPreOp make(const ModelConfig& config, uint64_t rows);

  struct Bound {
    const float* streams = nullptr;
    const float* fn = nullptr;
    const float* scale = nullptr;
    const float* bias = nullptr;
    float* post = nullptr;
    float* comb = nullptr;
    uint16_t* block_in = nullptr;
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "hc_pre_sinkhorn"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Split-path layout of hc_lowrank_scratch (§4.7, T ≤ 64, FP32): normed [T, hc·h] then
// low [T, r], carved back to back at the pass's T rows.
struct MhcSplitCarve {
  // The split path runs passes of T ≤ kMaxRows tokens; longer ones take the GEMM path
  // (docs/spec/numerics.md §4). The one rule every caller (plans, harness, CLI, generators) asks.
  static constexpr uint64_t kMaxRows = 64;
  static bool takes_split_path(uint64_t rows) { return rows <= kMaxRows; }

  uint64_t rows = 0, hc = 0, h = 0, r = 0;
  uint64_t normed = 0, low = 0, end = 0;  // byte offsets

  static MhcSplitCarve make(uint64_t rows, uint64_t hc, uint64_t h, uint64_t r);
};

// GEMM-path layout (§4.7, T > 64, BF16): normed [Ts, hc·h] | up_pre [Ts, hc·h] | low
// [Ts, r] | inj_pre [Ts, hc], carved ONCE for Ts = min(m, 2048) slab rows (the slab rows
// the layout was sized for); every slab, the last partial one included, uses these offsets.
struct MhcGemmCarve {
  static constexpr uint64_t kSlabRows = 2048;
  uint64_t slab_rows = 0, hc = 0, h = 0, r = 0;
  uint64_t normed = 0, up_pre = 0, low = 0, inj_pre = 0, end = 0;  // byte offsets

  static MhcGemmCarve make(uint64_t m, uint64_t hc, uint64_t h, uint64_t r);
};

// The GEMM path's slabs of a T-token pass: [row0, row0 + rows) in token order, each of at most
// MhcGemmCarve::kSlabRows rows (every one carved at the same MhcGemmCarve offsets).
struct MhcSlab {
  uint64_t row0 = 0, rows = 0;
};
std::vector<MhcSlab> mhc_gemm_slabs(uint64_t tokens);

// Low-rank pre step (docs/spec/numerics.md §4), split path: one stage per step over all T ≤ 64
// rows, FP32 throughout (weights included).
//   norm:     n_i = x_i·rsqrt(mean(x_i²) + eps)·(1 + w_i) per stream i → normed f32 [T, hc·h]
//   down:     low = silu((W_down·n)/hc) → low f32 [T, r];
//             post_i = 2σ((W_inject·n)_i / hc) → hc_post f32 [T, hc]
//   collapse: y[d] = (1/hc)·Σ_i σ((W_up·low)[i·h + d])·n[i·h + d] → norm_output bf16 [T, h]
// Weights: norm_w f32 [hc, h]; w_down_inject f32 [r + hc, hc·h] (W_down rows, then W_inject
// rows); w_up f32 [hc·h, r]. Operands a stage does not use bind to null.
struct MhcLowRankSplitOp {
  enum class Stage { norm, down, collapse };
  struct Shape {
    uint64_t rows = 0, hc = 0, h = 0, r = 0;
  };
  Stage stage = Stage::norm;
  MhcSplitCarve carve;
  Shape dims;
  double rms_eps = 1e-6;
  TensorRef streams, norm_w, normed, w_down_inject, low, post, w_up, block_in;

  static MhcLowRankSplitOp make(Stage stage, const ModelConfig& config, uint64_t rows);

  struct Bound {
    const float* streams = nullptr;        // norm
    const float* norm_w = nullptr;         // norm
    float* normed = nullptr;               // written by norm, read by down and collapse
    const float* w_down_inject = nullptr;  // down
    float* low = nullptr;                  // written by down, read by collapse
    float* post = nullptr;                 // down
    const float* w_up = nullptr;           // collapse
    uint16_t* block_in = nullptr;          // collapse
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const;
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Low-rank pre step, GEMM path: one slab of `rows` ≤ 2048 tokens at token row0, BF16
// intermediates at the MhcGemmCarve offsets (slab row j of the scratch = token row0 + j).
//   norm:     normed = bf16(n_i), n_i as on the split path (FP32 math)
//   down:     low = bf16(silu((normed·W_downᵀ)/hc))      BF16 GEMM, FP32 accumulate
//   inject:   inj_pre = bf16(normed·W_injectᵀ)            BF16 GEMM, FP32 accumulate
//   up:       up_pre = bf16(low·W_upᵀ)                    BF16 GEMM, FP32 accumulate
//   collapse: y[d] = bf16((1/hc)·Σ_i σ(up_pre[i·h + d])·normed[i·h + d]) → norm_output;
//             post_i = 2σ(inj_pre_i / hc) → hc_post f32 (FP32 math on the stored BF16)
// Weights: norm_w f32 [hc, h]; w_down bf16 [r, hc·h]; w_inject bf16 [hc, hc·h]; w_up bf16
// [hc·h, r] (the BF16 roundings of the split path's FP32 weights). Operands a stage does
// not use bind to null.
struct MhcLowRankSlabOp {
  enum class Stage { norm, down, inject, up, collapse };
  struct Shape {
    uint64_t row0 = 0, rows = 0, hc = 0, h = 0, r = 0;
  };
  Stage stage = Stage::norm;
  MhcGemmCarve carve;
  Shape dims;
  double rms_eps = 1e-6;
  TensorRef streams, norm_w, normed, w_down, low, w_inject, inj_pre, w_up, up_pre, block_in, post;

  // m: the max_batch_tokens the layout was carved for (SubLayoutParams::m).
  static MhcLowRankSlabOp make(Stage stage, const ModelConfig& config, uint64_t m, uint64_t row0,
                               uint64_t rows);

  struct Bound {
    const float* streams = nullptr;      // norm: token row0
    const float* norm_w = nullptr;       // norm
    uint16_t* normed = nullptr;          // norm writes; down, inject, collapse read
    const uint16_t* w_down = nullptr;    // down
    uint16_t* low = nullptr;             // down writes; up reads
    const uint16_t* w_inject = nullptr;  // inject
    uint16_t* inj_pre = nullptr;         // inject writes; collapse reads
    const uint16_t* w_up = nullptr;      // up
    uint16_t* up_pre = nullptr;          // up writes; collapse reads
    uint16_t* block_in = nullptr;        // collapse: token row0
    float* post = nullptr;               // collapse: token row0
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const;
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Post step: x'_j = post_j·block_out + Σ_i comb_ij x_i (Sinkhorn form) or x'_i = x_i +
// inj_i·block_out (low-rank form; inj is hc_post), FP32, in place on hc_streams (`out` is
// `streams` as made: each column's inputs are read before it is written). A harness may
// point `out` elsewhere (same shape) to run it out of place; the result must be identical
// bit for bit. Kernel mutant B13 rounds every written stream value to BF16.
struct MhcPostOp {
  struct Shape {
    uint64_t rows = 0, hc = 0, h = 0;
    bool lowrank = false;
  };
  Shape dims;
  TensorRef post, comb, block_out, streams, out;

  static MhcPostOp make(const ModelConfig& config, uint64_t rows);

  struct Bound {
    const float* post = nullptr;          // [rows, hc]
    const float* comb = nullptr;          // [rows, hc, hc]; null in the low-rank form
    const uint16_t* block_out = nullptr;  // bf16 [rows, h]
    const float* streams = nullptr;       // [rows, hc, h]
    float* out = nullptr;                 // [rows, hc, h]; may equal streams
  };
  // Also an Error when `out` overlaps `streams` without being the same tensor.
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "hc_post"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Head before the final norm: pre weights without Sinkhorn, y = Σ_i pre_i x_i →
// hidden_states bf16 [rows, h] "@hc_head" (both forms; docs/spec/numerics.md §3 "Head"):
// r = flattened rsqrt as in the pre step, pre_i = σ(r·(fn·x)_i·s0 + b_i) + hc_eps.
//   fn f32 [hc, hc·h]; scale f32 [1] (s0); bias f32 [hc].
struct MhcHeadOp {
  struct Shape {
    uint64_t rows = 0, hc = 0, h = 0;
  };
  Shape dims;
  double rms_eps = 1e-6, hc_eps = 1e-6;
  TensorRef streams, fn, scale, bias, output;

  static MhcHeadOp make(const ModelConfig& config, uint64_t rows);

  struct Bound {
    const float* streams = nullptr;
    const float* fn = nullptr;
    const float* scale = nullptr;
    const float* bias = nullptr;
    uint16_t* output = nullptr;
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "hc_head"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

}  // namespace bufferlab
