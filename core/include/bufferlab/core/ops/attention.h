// Op descriptors of full and sliding attention (docs/spec/buffers.md §5, docs/spec/numerics.md §8):
// the prefill staging copies out of qkv_output (Q copy, K and V scratch), the prefill and decode
// attention cores, the split-K merge and the sigmoid output gate. The QKV and O projections
// are projections (plan::emit_projection), not ops of this header.
//
// Rows of a pass: the decode part (decode, verify or the decode rows of a mixed step) comes
// first, the prefill part (its t tokens, n co-dispatched streams of L tokens back to back)
// after it. Extents come from the config and those rows; the one sub-layout offset (the V
// scratch row) is the sizing's m, passed in by the planner.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/tensor_ref.h"

namespace bufferlab {

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

// One prefill staging copy out of the QKV projection output, with the per-head norm and RoPE
// applied on the way: Q → ssm_deinterleaved [t, nq·hd] (the gate of a gated model stays in
// qkv_output: §3 sizes ssm_deinterleaved for m·nq·hd only); K → ssm_qkvz at row 0, V →
// ssm_qkvz at the sizing's row m, each [rows, nkv·hd] where rows = ceil16(t) on the FP8 path
// (§5 "ssm_qkvz"): rows t..rows−1 are phantom writes.
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
  };

  Part part = Part::q_copy;
  Shape dims;
  TensorRef src;  // qkv_output bf16 [t, qkv_dim]: whole rows, the footprint of a column slice
  TensorRef dst;  // bf16 [t, width]
  TensorRef pad;  // bf16 [rows − t, width] right after dst (no elements when rows == t)
  std::vector<Access> meta;  // uploaded metadata the copy reads (positions, slots)

  // padded_rows: the FP8 projection path (K and V only; Q is always t rows).
  static AttnStageOp make(const ModelConfig& config, Part part, uint64_t src_row0, uint64_t tokens,
                          bool padded_rows, uint64_t dst_row0, std::vector<Access> meta = {});

  const Shape& shape() const { return dims; }
  std::string name() const;  // attn_q_copy | attn_k_scratch | attn_v_scratch
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

// Varlen causal prefill attention over the staged Q copy and K/V scratch (+ the paged cache
// for the prefix of a chunked prefill). Each stream b reads its own K/V rows
// [b·L, min((b+1)·L, row0+rows)): separate accesses, so a wrong stream offset shows. With
// the QSA indexer it also reads the slab's selection lists.
struct AttnPrefillOp {
  struct Shape {
    PrefillLaunch launch;
    uint64_t nq = 0, nkv = 0, hd = 0;
    uint64_t v_row0 = 0;      // V scratch row (the sizing's m)
    uint64_t list_width = 0;  // QSA blocks per query row (0: dense)
    bool sliding = false;
  };

  Shape dims;
  TensorRef q;                     // ssm_deinterleaved bf16 [rows, nq·hd] at row0
  std::vector<TensorRef> k;        // ssm_qkvz bf16 [·, nkv·hd], one per stream the launch touches
  std::vector<TensorRef> v;        // same rows at v_row0
  TensorRef kv_cache;              // weight pool: the paged cache (outside the arena)
  std::optional<TensorRef> lists;  // qsa_select_scratch i32 [rows, list_width]
  TensorRef out;                   // attn_output bf16 [rows, nq·hd] at decode_rows + row0
  std::vector<Access> meta;

  static AttnPrefillOp make(const ModelConfig& config, bool sliding, const PrefillLaunch& launch,
                            uint64_t v_row0, std::optional<TensorRef> lists = std::nullopt,
                            std::vector<Access> meta = {});

  const Shape& shape() const { return dims; }
  std::string name() const { return "attn_prefill"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Decode / verify attention: reads the qkv_output rows directly (RoPE fused) and the paged
// cache. With splits > 1 (decode and mixed steps only) it writes split-K partials, slot
// ((seq·nq)+head)·splits+split of (hd+2) f32 for every seq < rows (docs/spec/numerics.md §8);
// with one split it writes attn_output and never touches splitk_workspace.
struct AttnDecodeOp {
  struct Shape {
    uint64_t rows = 0;  // decode rows: rung(n), or the verify rows
    uint64_t nq = 0, nkv = 0, hd = 0, qkv_dim = 0;
    uint64_t splits = 1;
    bool verify = false;
    bool sliding = false;
  };

  Shape dims;
  TensorRef qkv;       // qkv_output bf16 [rows, qkv_dim]
  TensorRef kv_cache;  // weight pool
  TensorRef out;       // splitk_workspace f32 [rows, nq, splits, hd+2] or attn_output bf16
  std::vector<Access> meta;

  // splits: splitk_splits(target, nq, R) for decode and mixed steps, 1 for verify.
  static AttnDecodeOp make(const ModelConfig& config, bool sliding, uint64_t rows, uint64_t splits,
                           bool verify, std::vector<Access> meta = {});

  bool split_k() const { return dims.splits > 1; }
  const Shape& shape() const { return dims; }
  std::string name() const { return dims.verify ? "attn_verify" : "attn_decode"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Split-K merge: m = max m_p, l = Σ l_p e^(m_p − m), o = Σ l_p e^(m_p − m) o_p / l.
struct SplitKMergeOp {
  struct Shape {
    uint64_t rows = 0, nq = 0, hd = 0, splits = 0;
  };

  Shape dims;
  TensorRef partials;  // splitk_workspace f32 [rows, nq, splits, hd+2]
  TensorRef out;       // attn_output bf16 [rows, nq·hd]

  static SplitKMergeOp make(const ModelConfig& config, uint64_t rows, uint64_t splits);

  const Shape& shape() const { return dims; }
  std::string name() const { return "splitk_merge"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Gated attention (attn_gated): attn_output ⊙= sigmoid(gate), the gate read from the
// [Q, gate] part of qkv_output; in place, once for every row of the pass.
struct AttnGateOp {
  struct Shape {
    uint64_t rows = 0, nq = 0, hd = 0, qkv_dim = 0;
  };

  Shape dims;
  TensorRef gate;  // qkv_output bf16 [rows, qkv_dim]
  TensorRef attn;  // attn_output bf16 [rows, nq·hd], read and written in place

  static AttnGateOp make(const ModelConfig& config, uint64_t rows);

  const Shape& shape() const { return dims; }
  std::string name() const { return "attn_gate"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

}  // namespace bufferlab
