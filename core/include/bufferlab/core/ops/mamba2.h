// The ops of a Mamba-2 layer between its two projections (docs/spec/numerics.md §6,
// docs/spec/buffers.md §4.6, §5): causal conv1d over xBC, the chunked SSD (dt/dA_cumsum, CB,
// scan) per sequence or the recurrence, and the gated RMSNorm into norm_output. Extents come
// from the config and the pass rows; only the §4.6 array OFFSETS come from the sizing (nc).
//
// Every op a backend executes binds its operands through bind(ws). Pinned for the CPU and
// CUDA kernels and the FP64 oracle alike (what the spec leaves open):
//   - Layouts. in_proj rows [z (d_inner) | xBC (d_xbc) | dt (H)]; xBC rows [x (d_inner) |
//     B (ng·N) | C (ng·N)], head h's x at columns [h·P, (h+1)·P), group g's B at d_inner +
//     g·N, its C at d_inner + ng·N + g·N. Head h belongs to group h / (H/G) (H % G = 0, an
//     Error otherwise; ng = 0 is refused: B and C need a group). The SSM state is f32
//     [H][P][N] per sequence, outside the arena; the conv tail bf16 [sequences, d_xbc, K−1],
//     oldest input first. A, dt_bias, D are f32 [H] weights (A = −exp(A_log)).
//   - dt = min(max(softplus(dt_raw + dt_bias), 1e-9), 1e9), softplus(x) = x for x > 20 else
//     log1p(exp(x)), FP32. dA_cumsum[i] = Σ_{j≤i} dt_j·A (FP32, j ascending) per chunk.
//   - CB[c][g][t][s] = Σ_n C_t[n]·B_s[n] for every t, s inside the chunk (the full square);
//     rows and columns past a partial last chunk, and dt / dA_cumsum past it, are written 0.
//   - Scan per head, chunk by chunk, FP32 state carry h0 [P][N]:
//     y_t = exp(min(cs_t, 0))·(C_t·h0) + Σ_{s≤t} CB[t][s]·exp(min(cs_t − cs_s, 0))·dt_s·x_s
//           + D·x_t → BF16;
//     h0 ← exp(min(cs_last, 0))·h0 + Σ_s exp(min(cs_last − cs_s, 0))·dt_s·x_s B_sᵀ,
//     reading dt, dA_cumsum and CB as STORED in ssd_scratch.
//   - Recurrence (FP32): dt as above, h ← exp(dt·A)·h + dt·x_t B_tᵀ, y_t = h·C_t + D·x_t.
//   - Limits: P and N at most kMaxMamba2Dim (an Error beyond). Non-finite inputs propagate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab {

inline constexpr uint64_t kMaxMamba2Dim = 256;  // largest head dim P and state size N
inline constexpr float kMamba2DtMin = 1e-9f, kMamba2DtMax = 1e9f;
inline constexpr float kSoftplusThreshold = 20.0f;  // softplus(x) = x above it

// Geometry of a Mamba-2 layer (docs/spec/buffers.md §1). in_proj rows are [z (d_inner) | xBC
// (d_xbc) | dt (H)]; xBC is [x (d_inner) | B (ng·N) | C (ng·N)].
struct Mamba2Geometry {
  uint64_t H = 0, P = 0, N = 0, ng = 0, kernel = 0;
  uint64_t G = 0;  // max(n_groups, 1): groups of the CB array (§4.6)
  uint64_t d_inner = 0, d_xbc = 0, in_proj = 0;

  static Mamba2Geometry of(const ModelConfig& config);
  std::string to_string() const;  // "H=8,P=16,N=16,groups=1,conv=4"
};

// Causal depthwise conv1d + SiLU over the xBC columns of in_proj's output (ssm_qkvz, read as
// whole rows: a TensorRef is one contiguous range) → ssm_deinterleaved bf16 [rows, d_xbc]:
// out[t, c] = bf16(silu(bias[c] + Σ_{j<K} w[c, j]·x[t − (K−1) + j, c])) in FP32 (bias first,
// then j ascending), inputs before a sequence's first row from its tail state, which it
// updates to the last K−1 inputs.
struct Mamba2ConvOp {
  struct Shape {
    uint64_t rows = 0, channels = 0, in_col = 0, in_stride = 0, kernel = 0, sequences = 1, L = 0;
  };
  Mamba2Geometry geom;
  Shape dims;
  TensorRef input, weight, bias, state, output;  // state bf16 [sequences, d_xbc, K−1]

  // rows = sequences·L (an Error otherwise).
  static Mamba2ConvOp make(const Mamba2Geometry& g, uint64_t rows, uint64_t sequences = 1);

  struct Bound {
    const uint16_t* input = nullptr;   // bf16 [rows, in_proj]
    const uint16_t* weight = nullptr;  // bf16 [d_xbc, K]
    const uint16_t* bias = nullptr;    // bf16 [d_xbc]
    uint16_t* state = nullptr;
    uint16_t* output = nullptr;  // bf16 [rows, d_xbc]
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "mamba2_conv1d"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// The §4.6 carve of ssd_scratch for nc chunks: dt [H][nc][64] f32 | dA_cumsum [H][nc][64]
// f32 | CB [nc][G][64][64] f32.
struct Mamba2ChunkCarve {
  static constexpr uint64_t kChunk = 64;
  uint64_t nc = 0, H = 0, G = 0;
  uint64_t dt = 0, da = 0, cb = 0, end = 0;  // byte offsets inside ssd_scratch

  static Mamba2ChunkCarve make(uint64_t nc, uint64_t H, uint64_t G);
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
struct Mamba2ChunkOp {
  enum class Stage { cumsum, bmm, scan };
  struct Shape {
    uint64_t row0 = 0, rows = 0, chunks = 0, stream = 0, streams = 0;
    uint64_t H = 0, P = 0, N = 0, G = 0, d_inner = 0, d_xbc = 0, in_proj = 0;
  };
  Stage stage = Stage::cumsum;
  Mamba2ChunkCarve carve;
  Shape dims;
  TensorRef a_log, dt_bias, D;  // weights f32 [H]
  TensorRef state;              // weights f32 [H, P, N]: this sequence's state, in and out

  // `stream` of `streams` names the values (one sequence's dt must not stand in for another's).
  static Mamba2ChunkOp make(Stage stage, const Mamba2Geometry& g, uint64_t row0, uint64_t rows,
                            uint64_t nc, uint64_t stream = 0, uint64_t streams = 1);

  // Every operand of every stage (a stage ignores those it does not use). dt / dA_cumsum of
  // head h, chunk c start at element (h·nc + c)·64 of their base; CB chunk c, group g at
  // ((c·G) + g)·64·64. Error: a span outside ssd_scratch (a short nc), P or N > kMaxMamba2Dim,
  // H % G ≠ 0 or ng = 0.
  struct Bound {
    const uint16_t* zxbcdt = nullptr;  // bf16 [rows, in_proj] at row0 (dt_raw columns)
    const uint16_t* xbc = nullptr;     // bf16 [rows, d_xbc] at row0
    float* dt = nullptr;               // f32, head stride nc·64
    float* da = nullptr;               // f32, head stride nc·64
    float* cb = nullptr;               // f32 [chunks, G, 64, 64]
    const float* a_log = nullptr;
    const float* dt_bias = nullptr;
    const float* D = nullptr;
    float* state = nullptr;      // f32 [H, P, N]
    uint16_t* output = nullptr;  // bf16 [rows, d_inner] at row0
    uint64_t nc = 0;             // head stride of dt / dA_cumsum, in chunks
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const;
  std::string params() const;
  std::vector<Access> accesses() const;

  // The arena operands bind() resolves, made once by make() (a launch allocates nothing).
  struct Operands {
    TensorRef zxbcdt, xbc, dt, da, cb, output;
  };
  Operands operands;

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
    uint64_t G = 0, d_inner = 0, d_xbc = 0, in_proj = 0, sequences = 0, L = 0;
  };
  Shape dims;
  TensorRef zxbcdt, xbc, state, output;  // state f32 [sequences, H, P, N]
  TensorRef a_log, dt_bias, D;           // weights f32 [H]

  // `sequences` equal-length sequences (0 = rows: one token each, a decode batch).
  static Mamba2RecurrentOp make(const Mamba2Geometry& g, uint64_t row0, uint64_t rows,
                                uint64_t sequences = 0);

  struct Bound {
    const uint16_t* zxbcdt = nullptr;  // bf16 [rows, in_proj]
    const uint16_t* xbc = nullptr;     // bf16 [rows, d_xbc]
    const float* a_log = nullptr;
    const float* dt_bias = nullptr;
    const float* D = nullptr;
    float* state = nullptr;      // f32 [sequences, H, P, N]
    uint16_t* output = nullptr;  // bf16 [rows, d_inner]
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "mamba2_recurrent"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Gated RMSNorm of the SSD output with z (the in_proj prefix of each row), grouped over
// d_inner / G columns → norm_output bf16 [rows, d_inner] (docs/spec/buffers.md §5 norm_output).
// Mamba-2's norm_before_gate = False: g = o·silu(z), y = g·rsqrt(mean_group(g²) + eps)·w, FP32,
// BF16 store; w bf16 [d_inner], plain weight.
struct Mamba2GatedNormOp {
  struct Shape {
    uint64_t rows = 0, d_inner = 0, group_size = 0, z_row_stride = 0;
  };
  Shape dims;
  double eps = 1e-6;
  TensorRef input, z, weight, output;

  static Mamba2GatedNormOp make(const Mamba2Geometry& g, uint64_t rows, double eps);

  struct Bound {
    const uint16_t* input = nullptr;   // bf16 [rows, d_inner]
    const uint16_t* z = nullptr;       // bf16 [rows, z_row_stride]; z at column 0
    const uint16_t* weight = nullptr;  // bf16 [d_inner]
    uint16_t* output = nullptr;        // bf16 [rows, d_inner]
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "mamba2_gated_norm"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

}  // namespace bufferlab
