// The ops of a Mamba-2 layer between its two projections (spec/numerics.md §6,
// spec/buffers.md §4.6, §5): causal conv1d over xBC, the chunked SSD (dt/dA_cumsum, CB,
// scan) per sequence or the recurrence, and the gated RMSNorm into norm_output. Extents come
// from the config and the pass rows; only the §4.6 array OFFSETS come from the sizing (nc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/tensor_ref.h"

namespace bufferlab {

// Geometry of a Mamba-2 layer (spec §1). in_proj rows are [z (d_inner) | xBC (d_xbc) |
// dt (H)]; xBC is [x (d_inner) | B (ng·N) | C (ng·N)].
struct Mamba2Geometry {
  uint64_t H = 0, P = 0, N = 0, ng = 0, kernel = 0;
  uint64_t G = 0;  // max(n_groups, 1): groups of the CB array (§4.6)
  uint64_t d_inner = 0, d_xbc = 0, in_proj = 0;

  static Mamba2Geometry of(const ModelConfig& config);
  std::string to_string() const;  // "H=8,P=16,N=16,groups=1,conv=4"
};

// Causal depthwise conv1d + SiLU over the xBC columns of in_proj's output (ssm_qkvz, read as
// whole rows: a TensorRef is one contiguous range) → ssm_deinterleaved bf16 [rows, d_xbc].
struct Mamba2ConvOp {
  struct Shape {
    uint64_t rows = 0, channels = 0, in_col = 0, in_stride = 0, kernel = 0;
  };
  Mamba2Geometry geom;
  Shape dims;
  TensorRef input, weight, bias, state, output;

  static Mamba2ConvOp make(const Mamba2Geometry& g, uint64_t rows);
  const Shape& shape() const { return dims; }
  std::string name() const { return "mamba2_conv1d"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// The §4.6 carve of ssd_scratch for nc chunks: dt [H][nc][64] f32 | dA_cumsum [H][nc][64]
// f32 | CB [nc][G][64][64] f32.
struct SsdCarve {
  static constexpr uint64_t kChunk = 64;
  uint64_t nc = 0, H = 0, G = 0;
  uint64_t dt = 0, da = 0, cb = 0, end = 0;  // byte offsets inside ssd_scratch

  static SsdCarve make(uint64_t nc, uint64_t H, uint64_t G);
};

// Chunked SSD of ONE sequence of `rows` tokens at rows [row0, row0 + rows) (§4.6: in a
// co-dispatched pass the streams run one after another, each carving from the start).
// chunks = cdiv(rows, 64). dt and dA_cumsum are head-major with stride nc: head h uses
// elements [h·nc·64, h·nc·64 + chunks·64). Each array is ONE access spanning head 0's first
// chunk to head H−1's last (per-head accesses cost the verifier O(H²) per step for H = 256
// with nothing else living in the gaps); a short nc then shows as the dt span running into
// dA_cumsum, dA_cumsum into CB, and CB past the buffer. CB is chunk-major.
//   cumsum: dt = clamp(softplus(dt_raw + dt_bias)), dA_cumsum = inclusive Σ dt·A per chunk.
//   bmm:    CB[c][g][t][s] = C_t · B_s.
//   scan:   y (+ D x) → attn_output [rows, d_inner]; carries the state outside the arena.
struct SsdChunkOp {
  enum class Stage { cumsum, bmm, scan };
  struct Shape {
    uint64_t row0 = 0, rows = 0, chunks = 0, stream = 0, streams = 0;
    uint64_t H = 0, P = 0, N = 0, G = 0, d_inner = 0, d_xbc = 0, in_proj = 0;
  };
  Stage stage = Stage::cumsum;
  SsdCarve carve;
  Shape dims;

  // `stream` of `streams` names the values (one sequence's dt must not stand in for another's).
  static SsdChunkOp make(Stage stage, const Mamba2Geometry& g, uint64_t row0, uint64_t rows,
                         uint64_t nc, uint64_t stream = 0, uint64_t streams = 1);
  const Shape& shape() const { return dims; }
  std::string name() const;
  std::string params() const;
  std::vector<Access> accesses() const;

  TensorRef dt_span() const;      // ssd_scratch f32 [(H−1)·nc + chunks, 64] from the dt base
  TensorRef da_span() const;      // the same from the dA_cumsum base
  TensorRef cb() const;           // ssd_scratch f32 [chunks, G, 64, 64]
  TensorRef zxbcdt_rows() const;  // ssm_qkvz bf16 [rows, in_proj] at row0
  TensorRef xbc_rows() const;     // ssm_deinterleaved bf16 [rows, d_xbc] at row0
  TensorRef output_rows() const;  // attn_output bf16 [rows, d_inner] at row0
};

// Token-by-token recurrence h_t = exp(dt_t A) h_{t−1} + dt_t B_t x_tᵀ over rows
// [row0, row0 + rows): decode/verify rows, and every row when ssd_scratch is null.
struct Mamba2RecurrentOp {
  struct Shape {
    uint64_t row0 = 0, rows = 0, H = 0, P = 0, N = 0, ng = 0;
  };
  Shape dims;
  TensorRef zxbcdt, xbc, state, output;

  static Mamba2RecurrentOp make(const Mamba2Geometry& g, uint64_t row0, uint64_t rows);
  const Shape& shape() const { return dims; }
  std::string name() const { return "mamba2_recurrent"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Gated RMSNorm of the SSD output with z (the in_proj prefix of each row), grouped over
// d_inner / G columns → norm_output bf16 [rows, d_inner] (spec §5 norm_output).
struct Mamba2GatedNormOp {
  struct Shape {
    uint64_t rows = 0, d_inner = 0, group_size = 0, z_row_stride = 0;
  };
  Shape dims;
  double eps = 1e-6;
  TensorRef input, z, weight, output;

  static Mamba2GatedNormOp make(const Mamba2Geometry& g, uint64_t rows, double eps);
  const Shape& shape() const { return dims; }
  std::string name() const { return "mamba2_gated_norm"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

}  // namespace bufferlab
