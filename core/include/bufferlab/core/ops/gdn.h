// The ops of a Gated DeltaNet layer between its two projections (spec/numerics.md §5,
// spec/buffers.md §4.5, §5): de-interleave of in_proj_qkvz, causal conv1d + SiLU, the β/α
// gates, the chunked core (W/U, state pass, output — the stages numerics §9 checks) or the
// token-by-token recurrence, and the gated RMSNorm. Extents come from the config and the
// pass rows; only the §4.5 region OFFSETS come from the sizing under test (nt).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/tensor_ref.h"

namespace bufferlab {

// Head geometry of a GDN layer (spec §1).
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
struct GdnConvOp {
  struct Shape {
    uint64_t rows = 0, channels = 0, row_stride = 0, kernel = 0;
  };
  GdnGeometry geom;
  Shape dims;
  TensorRef input;   // ssm_deinterleaved bf16 [rows, qkvz]
  TensorRef weight;  // weights bf16 [conv_dim, kernel]
  TensorRef state;   // weights bf16 [rows, conv_dim, kernel-1]: conv tails (upper bound)
  TensorRef output;  // ssm_conv_out_f32 f32 [rows, conv_dim]

  static GdnConvOp make(const GdnGeometry& g, uint64_t rows);
  const Shape& shape() const { return dims; }
  std::string name() const { return "gdn_conv1d"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// β = sigmoid(b), α = exp(−exp(A_log)·softplus(a + dt_bias)) from ssm_ba [rows, 2nv] →
// ssm_gates f32 [rows, nv, 2].
struct GdnGatesOp {
  struct Shape {
    uint64_t rows = 0, nv = 0;
  };
  Shape dims;
  TensorRef ba, a_log, dt_bias, gates;

  static GdnGatesOp make(const GdnGeometry& g, uint64_t rows);
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

// The chunked GDN core (numerics §5, C = 64) over the prefill rows of a pass: `streams`
// sequences of L tokens each, kernel-batched, rows [row0, row0 + streams·L). Stream b
// uses chunks_per_stream = cdiv(L, 64) chunks; region (b, c, v) = (b·cdiv(L,64) + c)·nv + v
// (§4.5). Every stream's regions are separate accesses, so a carve whose nt is short shows
// as an overlap between streams/arrays or a bounds finding.
//   wu:     gc (cumulative log α), then W, U by forward substitution.
//   state:  S_c snapshots (BF16) and uc per chunk; reads/writes the recurrent state.
//   output: O = diag(exp gc) Q S_c + (Q Kᵀ ⊙ M) uc → attn_output rows [rows, nv·vd].
struct GdnChunkOp {
  enum class Stage { wu, state, output };
  struct Shape {
    uint64_t row0 = 0, rows = 0, streams = 0, L = 0, chunks_per_stream = 0, chunks = 0;
    uint64_t nk = 0, kd = 0, nv = 0, vd = 0, conv_dim = 0;
  };
  Stage stage = Stage::wu;
  GdnChunkCarve carve;
  Shape dims;

  static GdnChunkOp make(Stage stage, const GdnGeometry& g, uint64_t row0, uint64_t streams,
                         uint64_t L, uint64_t nt);
  const Shape& shape() const { return dims; }
  std::string name() const;
  std::string params() const;
  std::vector<Access> accesses() const;

  // The per-stream slice of one carve array: regions [b·cps·nv, (b+1)·cps·nv).
  enum class Array { W, U, S, uc, gc };
  TensorRef region(Array a, uint64_t stream) const;
  TensorRef conv_rows() const;    // ssm_conv_out_f32 f32 [rows, conv_dim] at row0
  TensorRef gate_rows() const;    // ssm_gates f32 [rows, nv, 2] at row0
  TensorRef output_rows() const;  // attn_output bf16 [rows, nv·vd] at row0
};

// Token-by-token recurrence S_t = α_t (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ over rows
// [row0, row0 + rows): decode/verify rows, and prefill rows when the chunked scratch is
// null (kd or vd ≠ 128). The state lives outside the arena.
struct GdnRecurrentOp {
  struct Shape {
    uint64_t row0 = 0, rows = 0, nk = 0, kd = 0, nv = 0, vd = 0, conv_dim = 0;
  };
  Shape dims;
  TensorRef conv, gates, state, output;

  static GdnRecurrentOp make(const GdnGeometry& g, uint64_t row0, uint64_t rows);
  const Shape& shape() const { return dims; }
  std::string name() const { return "gdn_recurrent"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Gated RMSNorm y = RMSNorm(o)·w·silu(z) per value head (numerics §1, §5), in place on
// attn_output [rows, nv·vd] (identical read and write TensorRef); z is the Z block of the
// de-interleaved rows (read as whole rows: a TensorRef is one contiguous range).
struct GdnGatedNormOp {
  struct Shape {
    uint64_t rows = 0, heads = 0, head_dim = 0, z_col = 0, z_row_stride = 0;
  };
  Shape dims;
  double eps = 1e-6;
  TensorRef io, z, weight;

  static GdnGatedNormOp make(const GdnGeometry& g, uint64_t rows, double eps);
  const Shape& shape() const { return dims; }
  std::string name() const { return "gdn_gated_norm"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

}  // namespace bufferlab
