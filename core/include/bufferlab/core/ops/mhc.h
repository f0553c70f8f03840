// The mHC hyper-connection ops (spec/numerics.md §3–§4, spec/buffers.md §4.7, §5): expand
// the embedding into hc FP32 streams, the pre step (Sinkhorn form, or the low-rank form on
// its split or GEMM path) that writes the block input into norm_output, the post step that
// updates the streams in place, and the head before the final norm.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/tensor_ref.h"

namespace bufferlab {

// Every stream = the embedding row: hidden_states bf16 [rows, h] "@x" → hc_streams f32
// [rows, hc, h] "@hc".
struct HcExpandOp {
  struct Shape {
    uint64_t rows = 0, hc = 0, h = 0;
  };
  Shape dims;
  TensorRef input, streams;

  static HcExpandOp make(const ModelConfig& config, uint64_t rows);
  const Shape& shape() const { return dims; }
  std::string name() const { return "hc_expand"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Sinkhorn-form pre step (numerics §3, steps 1–5): per token the mix vector, pre/post
// weights and the Sinkhorn-normalised comb matrix, and the block input Σ pre_i x_i.
struct HcPreOp {
  struct Shape {
    uint64_t rows = 0, hc = 0, h = 0, mix = 0, iters = 0;
  };
  Shape dims;
  TensorRef streams, fn, scale, bias, post, comb, block_in;

  static HcPreOp make(const ModelConfig& config, uint64_t rows);
  const Shape& shape() const { return dims; }
  std::string name() const { return "hc_pre_sinkhorn"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Split-path layout of hc_lowrank_scratch (§4.7, T ≤ 64, FP32): normed [T, hc·h] then
// low [T, r], carved back to back at the pass's T rows.
struct HcSplitCarve {
  uint64_t rows = 0, hc = 0, h = 0, r = 0;
  uint64_t normed = 0, low = 0, end = 0;  // byte offsets

  static HcSplitCarve make(uint64_t rows, uint64_t hc, uint64_t h, uint64_t r);
};

// GEMM-path layout (§4.7, T > 64, BF16): normed [Ts, hc·h] | up_pre [Ts, hc·h] | low
// [Ts, r] | inj_pre [Ts, hc], carved ONCE for Ts = min(m, 2048) slab rows (the slab rows
// the layout was sized for); every slab, the last partial one included, uses these offsets.
struct HcGemmCarve {
  static constexpr uint64_t kSlabRows = 2048;
  uint64_t slab_rows = 0, hc = 0, h = 0, r = 0;
  uint64_t normed = 0, up_pre = 0, low = 0, inj_pre = 0, end = 0;  // byte offsets

  static HcGemmCarve make(uint64_t m, uint64_t hc, uint64_t h, uint64_t r);
};

// Low-rank pre step (numerics §4), split path: one stage per step over all T ≤ 64 rows.
//   norm:     n_i = RMSNorm(x_i)·(1 + w_i)              → normed f32
//   down:     low = silu(W_down n / hc), inj = 2σ(W_inject n / hc) → low f32, hc_post
//   collapse: y = (1/hc) Σ σ(W_up low)_i ⊙ n_i          → norm_output bf16
struct HcLowRankSplitOp {
  enum class Stage { norm, down, collapse };
  struct Shape {
    uint64_t rows = 0, hc = 0, h = 0, r = 0;
  };
  Stage stage = Stage::norm;
  HcSplitCarve carve;
  Shape dims;

  static HcLowRankSplitOp make(Stage stage, const ModelConfig& config, uint64_t rows);
  const Shape& shape() const { return dims; }
  std::string name() const;
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Low-rank pre step, GEMM path: one slab of `rows` ≤ 2048 tokens at token row0, BF16
// intermediates at the HcGemmCarve offsets.
//   norm:     normed;  down: low = silu(normed·W_downᵀ / hc);  inject: inj_pre;
//   up:       up_pre = low·W_upᵀ;  collapse: block input → norm_output, 2σ(inj_pre / hc) →
//   hc_post.
struct HcLowRankSlabOp {
  enum class Stage { norm, down, inject, up, collapse };
  struct Shape {
    uint64_t row0 = 0, rows = 0, hc = 0, h = 0, r = 0;
  };
  Stage stage = Stage::norm;
  HcGemmCarve carve;
  Shape dims;

  // m: the max_batch_tokens the layout was carved for (SubLayoutParams::m).
  static HcLowRankSlabOp make(Stage stage, const ModelConfig& config, uint64_t m, uint64_t row0,
                              uint64_t rows);
  const Shape& shape() const { return dims; }
  std::string name() const;
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Post step: x'_j = post_j·block_out + Σ_i comb_ij x_i (Sinkhorn form) or x'_i = x_i +
// inj_i·block_out (low-rank form), in place on hc_streams (identical read and write
// TensorRef: each column's inputs are read before it is written).
struct HcPostOp {
  struct Shape {
    uint64_t rows = 0, hc = 0, h = 0;
    bool lowrank = false;
  };
  Shape dims;
  TensorRef post, comb, block_out, streams;

  static HcPostOp make(const ModelConfig& config, uint64_t rows);
  const Shape& shape() const { return dims; }
  std::string name() const { return "hc_post"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Head before the final norm: pre weights without Sinkhorn, y = Σ_i pre_i x_i →
// hidden_states bf16 [rows, h] "@hc_head" (both forms; numerics §3 "Head").
struct HcHeadOp {
  struct Shape {
    uint64_t rows = 0, hc = 0, h = 0;
  };
  Shape dims;
  TensorRef streams, fn, output;

  static HcHeadOp make(const ModelConfig& config, uint64_t rows);
  const Shape& shape() const { return dims; }
  std::string name() const { return "hc_head"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

}  // namespace bufferlab
