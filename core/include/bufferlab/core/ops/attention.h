// Op descriptors of full and sliding grouped-query attention (docs/spec/attention.md,
// docs/spec/buffers.md §5, docs/spec/numerics.md §8): the prefill staging copies out of
// qkv_output (Q copy, K and V scratch) with the per-head norm and RoPE, the KV-cache write, the
// prefill and decode attention cores, the split-K merge and the sigmoid output gate. The QKV and
// O projections are projections (plan::emit_projection), not ops of this header.
//
// Rows of a pass: the decode part (decode, verify or the decode rows of a mixed step) comes
// first, the prefill part (its t tokens, n co-dispatched streams of L tokens back to back)
// after it. Extents come from the config and those rows; the one sub-layout offset (the V
// scratch row) is the sizing's m, passed in by the planner.
//
// Pinned for the CPU and CUDA kernels and the FP64 oracle alike (what the spec leaves open):
//   - qkv_output row: [Q (nq·hd) | gate (nq·hd, gated models only) | K (nkv·hd) | V (nkv·hd)];
//     head h at columns [h·hd, (h+1)·hd) of its part. (transformers' Qwen3-Next q_proj
//     interleaves query and gate per head; a weight loader permutes its rows into this layout.)
//   - The stage function S(x, positions) of one Q or K head row (docs/spec/attention.md §2), used
//   by the
//     Q copy, the K scratch, the decode cache write and the decode core alike, so staged and
//     decoded Q/K agree bit for bit:
//       qk_norm:  ss = Σ_i x_i² (FP32, i ascending); inv = 1 / sqrtf(ss / hd + eps) (IEEE
//                 sqrt and division); n_i = (x_i · inv) · (1 + w_i) — numerics §1's weight
//                 convention, w bf16 [hd]. Without qk_norm n_i = x_i. Kept in FP32.
//       RoPE:     for a pair (a, b) of frequency i (a = n_i, b = n_{i+rd/2}; interleaved
//                 a = n_{2i}, b = n_{2i+1}), θ = fp32(pos) · inv_freq_i (one FP32 multiply),
//                 c = cos(θ) · af, s = sin(θ) · af (af = the table's FP32 attention factor;
//                 cos, sin within CUDA's documented 2-ulp bound of cosf/sinf: the CPU's libm,
//                 the device's rope_sincos — FP64 reduction, correctly rounded — because
//                 nvcc's cosf + sinf on one angle put their reduction table in local memory,
//                 which the strict build refuses), a' = a·c − b·s, b' = b·c + a·s, each
//                 product and sum rounded (no FMA).
//                 pos is the frequency's position stream (MRoPE rule, docs/spec/attention.md §2) or
//                 the one stream. Dimensions ≥ rotary_dim keep n_i.
//       store:    one BF16 rounding (round to nearest even) of every dimension.
//   - RoPE table operand: f32 [rotary_dim/2 + 1], inv_freq then fp32(attention_factor), as
//     rope_table() (core/rope.h) makes it; a weight-pool tensor.
//   - Positions operand: u32 [pos_streams, pos_stride] (streams t, h, w with MRoPE, else one),
//     token i of a launch at element (stream·pos_stride + i).
//   - Paged cache: two weight-pool tensors, K and V, bf16 [num_blocks, block_size, nkv, hd].
//     Key j of a sequence lives at slot block_table[j / block_size]·block_size + j % block_size.
//     An unpaged cache (run shape kv_block_size = 0) is one block of max_seq_len tokens per
//     sequence. A slot or block entry outside [0, num_blocks·block_size) is never dereferenced:
//     the cache write skips its row (a negative slot marks a padding row), the cores skip the
//     key; the harness and compare refuse such metadata before a launch, naming the value.
//   - The core (docs/spec/attention.md §4), per (query row, head q), KV head q / (nq / nkv): the
//   query at
//     sequence position p sees keys j ∈ [lo, p], lo = max(0, p − W + 1) on a sliding layer
//     (window W = sliding_window), else 0. Keys are reduced in tiles of kAttnKeyTile absolute
//     positions [64·u, 64·u + 64) ∩ [lo, p], tiles ascending; a tile's visible keys only.
//     score_j = dot(q, k_j) · fp32(1/sqrt(hd)), the dot in FP32 over d ascending (FMA
//     contraction allowed; the bound covers either). Per tile: m' = max(m, max_j score_j);
//     α = expf(m − m') (0 for the first tile); l = l·α, acc_d = acc_d·α; then per key
//     ascending: e = expf(score_j − m'), l += e, acc_d += e·v_j[d] (FMA allowed). At the end,
//     sinks: m'' = max(m, sink_q), α = expf(m − m''), l = l·α + expf(sink_q − m''), acc ·= α.
//     Output o_d = bf16(acc_d / l).
//   - Prefill: stream b of the launch holds L = tokens / streams query rows; its sequence has
//     ctx_b = ctx_lens[b] keys in the cache before this chunk, so row i sits at p = ctx_b + i;
//     keys j < ctx_b come from the cache (block_table row b), keys ≥ ctx_b from the K/V
//     scratch rows b·L + (j − ctx_b).
//   - Decode / verify row r: query = S(qkv row r's Q head, positions[r]); p = seq_lens[r] − 1
//     (the cache write has already put row r's key at p); keys from the cache, block_table row
//     r. Rows r ≥ live (padding up to the launched rows) read nothing and write zeros (one
//     split: their attn_output row; split-K: their partial slots with m = −inf, l = 0, o = 0).
//   - Split-K (splits S > 1): the visible blocks b0 = lo / bs … b1 = p / bs are cut into S
//     contiguous parts of cdiv(b1 − b0 + 1, S) blocks; part k reduces its keys by the rule
//     above (tiles clipped to the part) and writes slot ((r·nq)+q)·S + k of (hd + 2) f32:
//     [o = acc / l (hd) | m | l]; an empty part writes o = 0, m = −inf, l = 0. Sinks are left
//     to the merge. Merge: m = max over parts with l_k ≠ 0 (a NaN l propagates) of m_k, and the
//     sink; w_k = l_k · expf(m_k − m); l = Σ_k w_k (k ascending) + expf(sink − m); o_d = bf16((Σ_k
//     w_k·o_k,d) / l). Rows ≥ live write zeros.
//   - Gate: y = bf16(a · (1 / (1 + expf(−g)))), a and g the BF16 attn_output and gate values.
//   - Limits: hd ≤ kMaxAttnHeadDim, nq % nkv = 0, rotary_dim even and ≤ hd (Error otherwise).
//     Kernels with the QSA indexer's selection lists are not implemented (bind refuses them).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab {

inline constexpr uint64_t kAttnKeyTile = 64;      // keys per reduction tile, at absolute positions
inline constexpr uint64_t kMaxAttnHeadDim = 512;  // largest head_dim the kernels take

// Value names (Access::value) of the attention intermediates, shared by the ops and the
// planner's projections; the planner scopes them to the layer.
namespace attn_value {
inline constexpr const char* norm = "norm";  // norm_output: the sub-block input
inline constexpr const char* qkv = "qkv";    // qkv_output: the QKV projection output
inline constexpr const char* q_copy = "q_copy";
inline constexpr const char* k_scratch = "k_scratch";
inline constexpr const char* v_scratch = "v_scratch";
inline constexpr const char* partials = "splitk_partials";
inline constexpr const char* attn = "attn";              // attn_output, before the gate
inline constexpr const char* attn_gated = "attn_gated";  // attn_output, after the gate
// The QSA indexer's regions of qsa_select_scratch (ops/qsa.h).
inline constexpr const char* qsa_qk = "qsa_qk";
inline constexpr const char* qsa_q_post = "qsa_q_post";
inline constexpr const char* qsa_scores = "qsa_scores";
inline constexpr const char* qsa_lists = "qsa_lists";
}  // namespace attn_value

// The attention geometry of a config (docs/spec/attention.md §1), what every kernel needs.
struct AttnGeometry {
  uint64_t nq = 0, nkv = 0, hd = 0, rotary_dim = 0, qkv_dim = 0;
  uint64_t gate_col0 = 0, k_col0 = 0, v_col0 = 0;  // qkv_output columns of gate, K, V
  uint64_t window = 0;                             // sliding_window (sliding layers only)
  bool gated = false, qk_norm = false, rope_interleaved = false, sinks = false;
  bool mrope = false, mrope_interleaved = false;
  std::array<uint64_t, 3> mrope_section{0, 0, 0};
  float eps = 1e-6f;  // qk_norm epsilon: fp32(rms_norm_eps)

  uint64_t group() const { return nkv == 0 ? 0 : nq / nkv; }  // query heads per KV head
  uint64_t pos_streams() const { return mrope ? 3 : 1; }
  uint64_t q_width() const { return nq * hd; }
  uint64_t kv_width() const { return nkv * hd; }
  uint64_t rope_entries() const { return rotary_dim / 2 + 1; }  // the table operand

  // Never throws: plans describe any validated config; the kernels' limits are check()'s.
  static AttnGeometry of(const ModelConfig& config);
  // Error naming the field and `op` (the op's params): nkv = 0 or nq % nkv ≠ 0, hd = 0 or
  // > kMaxAttnHeadDim, rotary_dim odd or > hd, MRoPE sections not summing to rotary_dim / 2.
  // Every bind() calls it.
  void check(const std::string& op) const;
  std::string to_string() const;  // "nq=16,nkv=2,hd=256,rd=64,gated,qk_norm,W=0"
};

// The paged KV cache an op reads or writes (docs/spec/attention.md §3).
struct KvCacheGeometry {
  uint64_t block_size = 16;  // tokens per block (> 0)
  uint64_t num_blocks = 0;   // physical blocks of the cache
  uint64_t max_blocks = 0;   // block-table entries per sequence
  uint64_t slots() const;    // num_blocks · block_size (checked)
};

// The uploaded metadata the kernels read (docs/spec/buffers.md §4.1–§4.4). In a pass plan the
// planner passes the regions as `meta` accesses and leaves these empty (no kernel runs a plan);
// a harness that launches the kernels sets the ones its op binds. An empty TensorRef (no shape)
// is absent: accesses() leaves it out and bind() refuses an op that needs it.
struct AttnMetaRefs {
  TensorRef positions;      // u32 [pos_streams, pos_stride]
  uint64_t pos_stride = 0;  // elements between position streams
  TensorRef slots;          // i64 [rows]: cache slot of each written row (< 0: skip)
  TensorRef lens;           // i32: prefill ctx_lens [streams]; decode seq_lens [rows]
  TensorRef block_table;    // i32 [sequences, max_blocks]
};

// The weight-pool operands of attention (each made at pool offset 0 like every weight; a
// harness places them, oracle/pool_placement.h).
struct AttnWeights {
  TensorRef rope;     // f32 [rotary_dim/2 + 1]
  TensorRef q_norm;   // bf16 [hd] (qk_norm)
  TensorRef k_norm;   // bf16 [hd] (qk_norm)
  TensorRef sinks;    // f32 [nq] (sinks)
  TensorRef k_cache;  // bf16 [num_blocks, block_size, nkv, hd]
  TensorRef v_cache;  // same
  static AttnWeights make(const AttnGeometry& g, const KvCacheGeometry& cache);
};

// One prefill staging copy out of the QKV projection output, with the stage function applied
// to Q and K (V is copied unchanged): Q → ssm_deinterleaved [t, nq·hd] (the gate of a gated
// model stays in qkv_output: §3 sizes ssm_deinterleaved for m·nq·hd only); K → ssm_qkvz at
// row 0, V → ssm_qkvz at the sizing's row m, each [rows, nkv·hd] where rows = ceil16(t) on the
// FP8 path (§5 "ssm_qkvz"): rows t..rows−1 are phantom rows, written zero.
struct AttnStageOp {
  enum class Part { q_copy, k_scratch, v_scratch };
  struct Shape {
    uint64_t src_row0 = 0;  // first qkv_output row of the prefill part (after the decode rows)
    uint64_t tokens = 0;    // t: rows read and really written
    uint64_t rows = 0;      // rows written, phantom included
    uint64_t dst_row0 = 0;  // destination row: 0, or the sizing's m for V
    uint64_t qkv_dim = 0;   // row width of qkv_output
    uint64_t col0 = 0;      // first qkv_output column of the part ([Q(, gate) | K | V])
    uint64_t width = 0;     // columns copied: nq·hd or nkv·hd
    uint64_t heads = 0;     // nq or nkv
  };

  Part part = Part::q_copy;
  AttnGeometry geom;
  Shape dims;
  TensorRef src;  // qkv_output bf16 [t, qkv_dim]: whole rows, the footprint of a column slice
  TensorRef dst;  // bf16 [t, width]
  TensorRef pad;  // bf16 [rows − t, width] right after dst (no elements when rows == t)
  AttnMetaRefs meta_refs;    // positions (Q and K)
  AttnWeights weights;       // rope, q_norm / k_norm
  std::vector<Access> meta;  // uploaded metadata a plan's copy reads (positions)

  // padded_rows: the FP8 projection path (K and V only; Q is always t rows).
  static AttnStageOp make(const ModelConfig& config, Part part, uint64_t src_row0, uint64_t tokens,
                          bool padded_rows, uint64_t dst_row0, std::vector<Access> meta = {},
                          AttnMetaRefs meta_refs = {});

  bool staged() const { return part != Part::v_scratch; }  // applies the stage function

  struct Bound {
    const uint16_t* src = nullptr;        // bf16 [t, qkv_dim] (row src_row0)
    uint16_t* dst = nullptr;              // bf16 [rows, width] (dst then pad)
    const uint32_t* positions = nullptr;  // staged parts
    const float* rope = nullptr;          // staged parts
    const uint16_t* norm = nullptr;       // staged parts with qk_norm
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const;  // attn_q_copy | attn_k_scratch | attn_v_scratch
  std::string params() const;
  std::vector<Access> accesses() const;
};

// The cache write (docs/spec/attention.md §3), its own op before any query of the step
// attends: row i's K and V heads go to slot slots[i] of the K and V caches.
//   scratch source (prefill): the staged K scratch rows and the V scratch rows at v_row0;
//   qkv source (decode, verify): qkv_output rows, K through the stage function (positions[i],
//   k_norm), V unchanged.
struct AttnCacheWriteOp {
  enum class Source { scratch, qkv };
  struct Shape {
    uint64_t rows = 0;      // rows written
    uint64_t src_row0 = 0;  // qkv source: first qkv_output row
    uint64_t v_row0 = 0;    // scratch source: the V scratch row (the sizing's m)
    uint64_t qkv_dim = 0;
    KvCacheGeometry cache;
  };

  Source source = Source::scratch;
  AttnGeometry geom;
  Shape dims;
  TensorRef k_src, v_src;  // scratch: ssm_qkvz [rows, nkv·hd] at 0 / v_row0; qkv: qkv_output rows
  AttnMetaRefs meta_refs;  // slots; positions (qkv source)
  AttnWeights weights;     // k_cache, v_cache (written); rope, k_norm (qkv source)
  std::vector<Access> meta;

  static AttnCacheWriteOp make(const ModelConfig& config, Source source, uint64_t src_row0,
                               uint64_t rows, uint64_t v_row0, const KvCacheGeometry& cache,
                               std::vector<Access> meta = {}, AttnMetaRefs meta_refs = {});

  struct Bound {
    const uint16_t* k_src = nullptr;  // row stride: nkv·hd (scratch) or qkv_dim (qkv)
    const uint16_t* v_src = nullptr;
    uint64_t src_stride = 0;  // elements between source rows
    const int64_t* slots = nullptr;
    const uint32_t* positions = nullptr;  // qkv source
    const float* rope = nullptr;          // qkv source
    const uint16_t* k_norm = nullptr;     // qkv source with qk_norm
    uint16_t* k_cache = nullptr;
    uint16_t* v_cache = nullptr;
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "attn_cache_write"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// The rows one prefill attention launch covers, inside the prefill part of the pass.
struct PrefillLaunch {
  uint64_t decode_rows = 0;  // rows of the pass before the prefill part
  uint64_t tokens = 0;       // t: prefill tokens of the pass
  uint64_t streams = 1;      // co-dispatched streams (kernel-batched with cu_seqlens)
  uint64_t row0 = 0;         // first prefill token of this launch (a QSA slab start, else 0)
  uint64_t rows = 0;         // query rows of this launch
};

// Varlen causal prefill attention over the staged Q copy and K/V scratch, plus the paged cache
// for each stream's prefix (ctx_lens). Each stream b reads its own K/V rows
// [b·L, min((b+1)·L, row0+rows)): separate accesses, so a wrong stream offset shows. With the
// QSA indexer it also reads the slab's selection lists (no kernel yet).
struct AttnPrefillOp {
  struct Shape {
    PrefillLaunch launch;
    uint64_t nq = 0, nkv = 0, hd = 0;
    uint64_t v_row0 = 0;      // V scratch row (the sizing's m)
    uint64_t list_width = 0;  // QSA blocks per query row (0: dense)
    bool sliding = false;
    uint64_t window = 0;  // W of a sliding layer, else 0
    bool sinks = false;
    KvCacheGeometry cache;
  };

  AttnGeometry geom;
  Shape dims;
  TensorRef q;                     // ssm_deinterleaved bf16 [rows, nq·hd] at row0
  std::vector<TensorRef> k;        // ssm_qkvz bf16 [·, nkv·hd], one per stream the launch touches
  std::vector<TensorRef> v;        // same rows at v_row0
  std::optional<TensorRef> lists;  // qsa_select_scratch i32 [rows, list_width]
  TensorRef out;                   // attn_output bf16 [rows, nq·hd] at decode_rows + row0
  AttnMetaRefs meta_refs;          // lens = ctx_lens [streams], block_table [streams, max_blocks]
  AttnWeights weights;             // k_cache, v_cache (read), sinks
  std::vector<Access> meta;

  static AttnPrefillOp make(const ModelConfig& config, bool sliding, const PrefillLaunch& launch,
                            uint64_t v_row0, const KvCacheGeometry& cache,
                            std::optional<TensorRef> lists = std::nullopt,
                            std::vector<Access> meta = {}, AttnMetaRefs meta_refs = {});

  uint64_t stream_rows() const { return dims.launch.tokens / dims.launch.streams; }  // L

  // Error: QSA lists or a launch not starting at row 0 (no kernel yet).
  struct Bound {
    const uint16_t* q = nullptr;  // bf16 [rows, nq·hd]
    const uint16_t* k = nullptr;  // bf16 [tokens, nkv·hd]: stream b's row i at b·L + i
    const uint16_t* v = nullptr;
    const int32_t* ctx_lens = nullptr;     // [streams]
    const int32_t* block_table = nullptr;  // [streams, max_blocks]
    const uint16_t* k_cache = nullptr;
    const uint16_t* v_cache = nullptr;
    const float* sinks = nullptr;  // [nq] with sinks
    uint16_t* out = nullptr;       // bf16 [rows, nq·hd]
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "attn_prefill"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Decode / verify attention: reads the qkv_output rows directly (the stage function fused) and
// the paged cache. With splits > 1 (decode and mixed steps only) it writes split-K partials,
// slot ((row·nq)+head)·splits+split of (hd+2) f32 for every row < rows
// (docs/spec/numerics.md §8); with one split it writes attn_output and never touches
// splitk_workspace.
struct AttnDecodeOp {
  struct Shape {
    uint64_t rows = 0;  // decode rows: rung(n), or the verify rows
    uint64_t live = 0;  // n: rows ≥ live are padding
    uint64_t nq = 0, nkv = 0, hd = 0, qkv_dim = 0;
    uint64_t splits = 1;
    bool verify = false;
    bool sliding = false;
    uint64_t window = 0;
    bool sinks = false;
    KvCacheGeometry cache;
  };

  AttnGeometry geom;
  Shape dims;
  TensorRef qkv;           // qkv_output bf16 [rows, qkv_dim]
  TensorRef out;           // splitk_workspace f32 [rows, nq, splits, hd+2] or attn_output bf16
  AttnMetaRefs meta_refs;  // positions [1, rows], lens = seq_lens [rows], block_table [rows, ·]
  AttnWeights weights;     // k_cache, v_cache (read), rope, q_norm, sinks (one split)
  std::vector<Access> meta;

  // splits: splitk_splits(target, nq, R) for decode and mixed steps, 1 for verify.
  static AttnDecodeOp make(const ModelConfig& config, bool sliding, uint64_t rows, uint64_t live,
                           uint64_t splits, bool verify, const KvCacheGeometry& cache,
                           std::vector<Access> meta = {}, AttnMetaRefs meta_refs = {});

  bool split_k() const { return dims.splits > 1; }

  struct Bound {
    const uint16_t* qkv = nullptr;
    const uint32_t* positions = nullptr;
    const int32_t* seq_lens = nullptr;
    const int32_t* block_table = nullptr;
    const uint16_t* k_cache = nullptr;
    const uint16_t* v_cache = nullptr;
    const float* rope = nullptr;
    const uint16_t* q_norm = nullptr;
    const float* sinks = nullptr;  // one split with sinks
    float* partials = nullptr;     // split-K
    uint16_t* out = nullptr;       // one split
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return dims.verify ? "attn_verify" : "attn_decode"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Split-K merge: m = max m_p, l = Σ l_p e^(m_p − m), o = Σ l_p e^(m_p − m) o_p / l, the sink
// joining m and l; rows ≥ live write zeros.
struct SplitKMergeOp {
  struct Shape {
    uint64_t rows = 0, live = 0, nq = 0, hd = 0, splits = 0;
    bool sinks = false;
  };

  Shape dims;
  TensorRef partials;  // splitk_workspace f32 [rows, nq, splits, hd+2]
  TensorRef out;       // attn_output bf16 [rows, nq·hd]
  TensorRef sinks;     // weight pool f32 [nq] with sinks

  static SplitKMergeOp make(const ModelConfig& config, uint64_t rows, uint64_t live,
                            uint64_t splits);

  struct Bound {
    const float* partials = nullptr;
    const float* sinks = nullptr;
    uint16_t* out = nullptr;
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "splitk_merge"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Gated attention (attn_gated): attn_output ⊙= sigmoid(gate), the gate read from the gate
// columns of qkv_output; in place, once for every row of the pass.
struct AttnGateOp {
  struct Shape {
    uint64_t rows = 0, nq = 0, hd = 0, qkv_dim = 0, gate_col0 = 0;
  };

  Shape dims;
  TensorRef gate;  // qkv_output bf16 [rows, qkv_dim]
  TensorRef attn;  // attn_output bf16 [rows, nq·hd], read and written in place

  static AttnGateOp make(const ModelConfig& config, uint64_t rows);

  struct Bound {
    const uint16_t* qkv = nullptr;  // gate at column gate_col0 of each row
    uint16_t* attn = nullptr;
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "attn_gate"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

}  // namespace bufferlab
