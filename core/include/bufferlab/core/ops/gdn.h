// The ops of a Gated DeltaNet layer between its two projections (docs/spec/numerics.md §5,
// docs/spec/buffers.md §4.5, §5): de-interleave of in_proj_qkvz, causal conv1d + SiLU, the β/α
// gates, the chunked core (W/U, state pass, output — the stages docs/spec/numerics.md §9 checks) or
// the token-by-token recurrence, and the gated RMSNorm. Extents come from the config and the pass
// rows; only the §4.5 region OFFSETS come from the sizing under test (nt).
//
// Every op a backend executes binds its operands through bind(ws) (typed addresses, each
// checked to hold exactly the elements shape() says). What the spec leaves open is pinned
// here, once, for the CPU and CUDA kernels and the FP64 oracle alike:
//   - Layouts. Conv output rows are [Q (nk·kd) | K (nk·kd) | V (nv·vd)], head i of Q at
//     columns [i·kd, (i+1)·kd). ssm_ba rows are [b (nv) | a (nv)]. Value head v reads key
//     head v / (nv/nk) (GQA, repeat_interleave). State S per value head is [kd][vd] (k index
//     major), f32 [sequences, nv, kd, vd], outside the arena. The conv tail state is bf16
//     [sequences, channels, kernel−1], oldest input first, outside the arena.
//   - Sequences. Conv, the chunked core and the recurrence take `sequences` (`streams`)
//     equal-length sequences of L = rows / sequences tokens, back to back in the rows; each
//     carries its own conv tail and S (a decode batch is rows sequences of L = 1).
//   - q, k: L2-normalised per head in FP32, x·(1/sqrt(Σx² + kGdnL2Eps)); q then times the
//     FP32 constant kd^-1/2. Every stage that reads q or k normalises the f32 conv output it
//     reads (nothing normalised is stored).
//   - softplus(x) = x for x > 20, else log1p(exp(x)) (docs/spec/numerics.md §6's, for GDN's α too).
//   - Chunked stages (C = 64, kd = vd = 128 only; an Error otherwise): W, U solved by
//     forward substitution in FP32 (row i from the FP32 rows l < i), stored BF16; the state
//     pass snapshots the FP32 carry S_c to BF16 in S, computes uc = U − W·S_c from the STORED
//     W, U and the FP32 carry, stores uc BF16 and updates the carry from the STORED uc:
//     S_{c+1} = exp(gc_last)·S_c + Kᵀ·diag(exp(gc_last − gc))·uc. The output stage reads the
//     stored S snapshot, uc and gc. Rows past the end of a partial last chunk are written
//     as zeros in W, U, uc and gc (no region byte stays unwritten).
//   - Non-finite inputs propagate (a NaN in a sequence's inputs makes its later outputs and
//     its state NaN); nothing is clamped but α (log max(α, 1e-30)) and the softplus.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab {

inline constexpr float kGdnL2Eps = 1e-6f;        // q/k L2 normalisation epsilon
inline constexpr float kGdnAlphaFloor = 1e-30f;  // gc accumulates log max(α, 1e-30)
// The largest kd / vd the recurrence handles (per-head state tiles of kd×vd FP32).
inline constexpr uint64_t kMaxGdnHeadDim = 256;
// The only head size the chunked path runs (docs/spec/numerics.md §5).
inline constexpr uint64_t kGdnChunkedHeadDim = 128;

// Head geometry of a GDN layer (docs/spec/buffers.md §1).
struct GdnGeometry {
  uint64_t nk = 0, kd = 0, nv = 0, vd = 0, kernel = 0;
  uint64_t qkvz = 0;       // ssm_qkvz_size = 2·nk·kd + 2·nv·vd: [Q|K|V|Z] per token
  uint64_t conv_dim = 0;   // 2·nk·kd + nv·vd: the Q|K|V channels conv1d runs over
  uint64_t value_dim = 0;  // nv·vd: core output width (and Z width)

  static GdnGeometry of(const ModelConfig& config);
  std::string to_string() const;  // "nk=16,kd=128,nv=32,vd=128,conv=4"
};

// in_proj_qkvz output, interleaved per key head, → ssm_deinterleaved [rows, qkvz] as
// [Q | K | V | Z] (the order vLLM's fix_query_key_value_ordering produces; conv1d then
// runs on the contiguous Q|K|V prefix).
struct GdnDeinterleaveOp {
  struct Shape {
    uint64_t rows = 0, qkvz = 0;
  };
  GdnGeometry geom;
  Shape dims;
  TensorRef input, output;  // ssm_qkvz bf16 [rows, qkvz] → ssm_deinterleaved bf16 [rows, qkvz]

  static GdnDeinterleaveOp make(const GdnGeometry& g, uint64_t rows);
  const Shape& shape() const { return dims; }
  std::string name() const { return "gdn_deinterleave"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Causal depthwise conv1d + SiLU over the Q|K|V channels, FP32 out. Reads the whole
// de-interleaved rows (the Q|K|V prefix of each row with stride qkvz: a TensorRef is one
// contiguous range) and the conv tail state outside the arena, which it updates.
//   out[t, c] = silu(Σ_{j<K} w[c, j] · x[t − (K−1) + j, c]), x before the sequence's first
//   row taken from its tail state (FP32 sum in j order; no bias). After the call the state
//   holds each sequence's last K−1 inputs (old tail entries shift in when L < K−1).
struct GdnConvOp {
  struct Shape {
    uint64_t rows = 0, channels = 0, row_stride = 0, kernel = 0, sequences = 1, L = 0;
  };
  GdnGeometry geom;
  Shape dims;
  TensorRef input;   // ssm_deinterleaved bf16 [rows, qkvz]
  TensorRef weight;  // weights bf16 [conv_dim, kernel]
  TensorRef state;   // weights bf16 [sequences, conv_dim, kernel-1]: conv tails
  TensorRef output;  // ssm_conv_out_f32 f32 [rows, conv_dim]

  // rows = sequences·L (an Error otherwise).
  static GdnConvOp make(const GdnGeometry& g, uint64_t rows, uint64_t sequences = 1);

  struct Bound {
    const uint16_t* input = nullptr;
    const uint16_t* weight = nullptr;
    uint16_t* state = nullptr;
    float* output = nullptr;
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "gdn_conv1d"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// β = sigmoid(b), α = exp(−exp(A_log)·softplus(a + dt_bias)) from ssm_ba [rows, 2nv] →
// ssm_gates f32 [rows, nv, 2].
// FP32 throughout: β = 1/(1 + exp(−b)), α = exp(−exp(A_log)·softplus(a + dt_bias)).
struct GdnGatesOp {
  struct Shape {
    uint64_t rows = 0, nv = 0;
  };
  Shape dims;
  TensorRef ba, a_log, dt_bias, gates;  // a_log, dt_bias: weights f32 [nv]

  static GdnGatesOp make(const GdnGeometry& g, uint64_t rows);

  struct Bound {
    const uint16_t* ba = nullptr;  // bf16 [rows, 2nv]: [b | a]
    const float* a_log = nullptr;
    const float* dt_bias = nullptr;
    float* gates = nullptr;  // f32 [rows, nv, 2]: (β, α)
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "gdn_gates"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// The §4.5 carve of gdn_fla_scratch for nt chunks: W | U | S | uc | gc back to back, each
// [nt·nv] regions. Offsets are a property of the layout (nt from the sizing under test).
struct GdnChunkCarve {
  static constexpr uint64_t kChunk = 64;
  uint64_t nt = 0, nv = 0, kd = 0, vd = 0;
  // Bytes of one region (one chunk of one value head) of each array.
  uint64_t w_region = 0, u_region = 0, s_region = 0, uc_region = 0, gc_region = 0;
  // Byte offset of each array inside gdn_fla_scratch, and the end of the carve.
  uint64_t w = 0, u = 0, s = 0, uc = 0, gc = 0, end = 0;

  static GdnChunkCarve make(uint64_t nt, uint64_t nv, uint64_t kd, uint64_t vd);
};

// The chunked GDN core (docs/spec/numerics.md §5, C = 64) over the prefill rows of a pass:
// `streams` sequences of L tokens each, kernel-batched, rows [row0, row0 + streams·L). Stream b
// uses chunks_per_stream = cdiv(L, 64) chunks; region (b, c, v) = (b·cdiv(L,64) + c)·nv + v
// (§4.5). Every stream's regions are separate accesses, so a carve whose nt is short shows
// as an overlap between streams/arrays or a bounds finding.
//   wu:     gc (cumulative log α), then W, U by forward substitution.
//   state:  S_c snapshots (BF16) and uc per chunk; reads/writes the recurrent state.
//   output: O = diag(exp gc) Q S_c + (Q Kᵀ ⊙ M) uc → attn_output rows [rows, nv·vd].
struct GdnChunkOp {
  enum class Stage { wu, state, output };
  enum class Array { W, U, S, uc, gc };
  struct Shape {
    uint64_t row0 = 0, rows = 0, streams = 0, L = 0, chunks_per_stream = 0, chunks = 0;
    uint64_t nk = 0, kd = 0, nv = 0, vd = 0, conv_dim = 0;
  };
  Stage stage = Stage::wu;
  GdnChunkCarve carve;
  Shape dims;
  TensorRef state;  // weights f32 [streams, nv, kd, vd]: each stream's S, in and out

  static GdnChunkOp make(Stage stage, const GdnGeometry& g, uint64_t row0, uint64_t streams,
                         uint64_t L, uint64_t nt);

  // Every operand of every stage (a stage ignores those it does not use). Each carve array
  // is bound as ONE span over all streams' regions: stream b's regions start b·cps·nv
  // regions after the base (cps = chunks_per_stream), region (b, c, v) at (b·cps + c)·nv + v.
  // Error: kd or vd ≠ 128, or a span outside gdn_fla_scratch (a short nt, mutant B15).
  struct Bound {
    const float* conv = nullptr;   // f32 [rows, conv_dim] at row0
    const float* gates = nullptr;  // f32 [rows, nv, 2] at row0
    uint16_t* W = nullptr;         // bf16 regions [64][kd]
    uint16_t* U = nullptr;         // bf16 regions [64][vd]
    uint16_t* S = nullptr;         // bf16 regions [kd][vd]
    uint16_t* uc = nullptr;        // bf16 regions [64][vd]
    float* gc = nullptr;           // f32 regions [64]
    float* state = nullptr;        // f32 [streams, nv, kd, vd]
    uint16_t* output = nullptr;    // bf16 [rows, nv·vd] at row0
  };
  Bound bind(const Workspace& ws) const;
  TensorRef span(Array a) const;  // all streams' regions of one array

  // The arena operands bind() resolves, made once by make(): a TensorRef's shape is a heap
  // vector, and a launch allocates nothing (docs/architecture.md).
  struct Operands {
    TensorRef conv, gates, W, U, S, uc, gc, output;
  };
  Operands operands;
  const Shape& shape() const { return dims; }
  std::string name() const;
  std::string params() const;
  std::vector<Access> accesses() const;

  // The per-stream slice of one carve array: regions [b·cps·nv, (b+1)·cps·nv).
  TensorRef region(Array a, uint64_t stream) const;
  TensorRef conv_rows() const;    // ssm_conv_out_f32 f32 [rows, conv_dim] at row0
  TensorRef gate_rows() const;    // ssm_gates f32 [rows, nv, 2] at row0
  TensorRef output_rows() const;  // attn_output bf16 [rows, nv·vd] at row0
};

// Token-by-token recurrence S_t = α_t (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ over rows
// [row0, row0 + rows): decode/verify rows, and prefill rows when the chunked scratch is
// null (kd or vd ≠ 128). The state lives outside the arena. Computed in FP32 as
// δ_t = β_t (v_t − α_t S_{t−1}ᵀ k_t), S_t = α_t S_{t−1} + k_t δ_tᵀ, o_t = S_tᵀ q_t → BF16
// (the same algebra; pinned so the kernels and the faithful oracle round alike).
// Error: kd or vd > kMaxGdnHeadDim.
struct GdnRecurrentOp {
  struct Shape {
    uint64_t row0 = 0, rows = 0, nk = 0, kd = 0, nv = 0, vd = 0, conv_dim = 0;
    uint64_t sequences = 0, L = 0;
  };
  Shape dims;
  TensorRef conv, gates, state, output;  // state: weights f32 [sequences, nv, kd, vd]

  // `sequences` equal-length sequences (0 = rows: one token each, a decode batch); rows must
  // be a multiple of it (an Error otherwise).
  static GdnRecurrentOp make(const GdnGeometry& g, uint64_t row0, uint64_t rows,
                             uint64_t sequences = 0);

  struct Bound {
    const float* conv = nullptr;   // f32 [rows, conv_dim]
    const float* gates = nullptr;  // f32 [rows, nv, 2]
    float* state = nullptr;        // f32 [sequences, nv, kd, vd]
    uint16_t* output = nullptr;    // bf16 [rows, nv·vd]
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "gdn_recurrent"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Gated RMSNorm y = RMSNorm(o)·w·silu(z) per value head (docs/spec/numerics.md §1, §5), in place on
// attn_output [rows, nv·vd] (identical read and write TensorRef); z is the Z block of the
// de-interleaved rows (read as whole rows: a TensorRef is one contiguous range). FP32:
// r = 1/sqrt(mean(o²) + eps), y = o·r·w·z/(1 + exp(−z)), stored BF16; w bf16 [vd], plain
// weight (not 1 + w), shared by the heads.
struct GdnGatedNormOp {
  struct Shape {
    uint64_t rows = 0, heads = 0, head_dim = 0, z_col = 0, z_row_stride = 0;
  };
  Shape dims;
  double eps = 1e-6;
  TensorRef io, z, weight;

  static GdnGatedNormOp make(const GdnGeometry& g, uint64_t rows, double eps);

  struct Bound {
    uint16_t* io = nullptr;       // bf16 [rows, heads·head_dim]
    const uint16_t* z = nullptr;  // bf16 [rows, z_row_stride]; Z at column z_col
    const uint16_t* weight = nullptr;
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "gdn_gated_norm"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

}  // namespace bufferlab
