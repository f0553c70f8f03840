// Drives one attention pass (docs/spec/attention.md, core ops/attention.h pins every formula and
// layout) through any Backend with the core interface only, and reads back what the backend
// stored after each op, so the judges (attention_judge.h) feed the FP64 stage references the
// backend's STORED inputs (docs/spec/numerics.md §9) and the properties compare bits.
//
// A pass holds a decode part (rows [0, R): decode, verify or the decode rows of a mixed step)
// and a prefill part (rows [R, R + t): `streams` co-dispatched streams of L tokens), either of
// which may be empty. Ops, in order (the cache write before any query of the step attends):
//   decode part:  attn_cache_write (qkv source) of the R rows
//   prefill part: attn_q_copy, attn_k_scratch, attn_v_scratch, attn_cache_write (scratch source)
//   decode part:  attn_decode (one split: attn_output; S > 1: partials) [+ splitk_merge]
//   prefill part: attn_prefill
//   gated models: attn_gate over all R + t rows
// The metadata (positions, slots, lens, block tables) lives in the `scratch` arena buffer; the
// RoPE table, norm weights, sinks and the K/V caches in the weight pool (oracle/pool_placement.h).
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/attention.h"

namespace bufferlab::oracle {

// The poison of the cache slots no sequence owns and of the unused block-table entries: a
// kernel that reads one produces NaN (BF16 0xFFFF) or dereferences nothing (entry −1).
inline constexpr uint16_t kAttnCachePoison = 0xFFFF;
inline constexpr int32_t kAttnNoBlock = -1;

// The prefill part of a pass: stream b is one sequence with ctx_lens[b] keys already in the
// cache; its L query rows sit at sequence positions ctx_lens[b] + i.
struct AttnPrefillPart {
  uint64_t streams = 0, L = 0;       // t = streams·L tokens (0: no prefill part)
  bool padded_rows = false;          // FP8 path: K/V scratch of ceil16(t) rows, the rest phantom
  uint64_t v_row0 = 0;               // V scratch row in ssm_qkvz (the sizing's m; ≥ K rows)
  std::vector<int32_t> ctx_lens;     // i32 [streams]
  std::vector<int32_t> block_table;  // i32 [streams, max_blocks]; unused entries kAttnNoBlock
  std::vector<uint32_t> positions;   // u32 [pos_streams, t]: RoPE positions (MRoPE: t, h, w)
  std::vector<int64_t> slots;        // i64 [t]: slot of key ctx_lens[b] + i of stream b

  uint64_t tokens() const { return streams * L; }
  uint64_t kv_rows() const { return padded_rows ? (tokens() + 15) / 16 * 16 : tokens(); }
};

// The decode part: row r < live is one sequence of seq_lens[r] keys, the last one its own
// (written by this pass's cache write at position seq_lens[r] − 1). Rows ≥ live are padding:
// their metadata is filled with VALID-looking values (lens, blocks, slots of other rows'
// blocks, unless the spec asks for −1 slots) that a kernel must not follow.
struct AttnDecodePart {
  uint64_t rows = 0, live = 0;       // R launched rows (0: no decode part), n live
  uint64_t splits = 1;               // S; 1 = one split (attn_output directly)
  bool verify = false;               // attn_verify (one split)
  std::vector<int32_t> seq_lens;     // i32 [R]
  std::vector<int32_t> block_table;  // i32 [R, max_blocks]
  std::vector<uint32_t> positions;   // u32 [pos_streams, R]
  std::vector<int64_t> slots;        // i64 [R]: live rows' slot of key seq_lens − 1; padding −1
};

// Everything one pass reads: the config, the metadata and the host values of every input.
struct AttnCase {
  ModelConfig config;
  AttnGeometry geom;  // AttnGeometry::of(config)
  KvCacheGeometry cache;
  bool sliding = false;      // a sliding layer: window geom.window
  uint64_t max_seq_len = 0;  // positions must stay below it (0: not checked)
  AttnDecodePart decode;
  AttnPrefillPart prefill;
  std::vector<uint16_t> qkv;      // bf16 [R + t, qkv_dim]: decode rows, then the prefill part
  std::vector<uint16_t> k_cache;  // bf16 [num_blocks, block_size, nkv, hd] before the pass
  std::vector<uint16_t> v_cache;  //   (prefix keys staged; other slots kAttnCachePoison)
  std::vector<float> rope;        // f32 [rotary_dim/2 + 1]: inv_freq, fp32(attention_factor)
  std::vector<uint16_t> q_norm;   // bf16 [hd] (qk_norm; else empty)
  std::vector<uint16_t> k_norm;   // bf16 [hd] (qk_norm; else empty)
  std::vector<float> sinks;       // f32 [nq] (sinks; else empty)

  uint64_t pass_rows() const { return decode.rows + prefill.tokens(); }
  uint64_t cache_elements() const;  // num_blocks · block_size · nkv · hd
};

// The planned ops of a case, operands placed (pool) and metadata bound (scratch arena).
struct AttnPlan {
  bool has_prefill = false, has_decode = false, gated = false;
  AttnCacheWriteOp decode_write;  // qkv source
  AttnDecodeOp decode;
  SplitKMergeOp merge;  // decode with splits > 1
  AttnStageOp q_copy, k_scratch, v_scratch;
  AttnCacheWriteOp prefill_write;  // scratch source
  AttnPrefillOp prefill;
  AttnGateOp gate;
  AttnWeights weights;  // the placed pool operands every op shares
  // The metadata tensors in `scratch` (AttnMetaRefs of the ops point at them).
  AttnMetaRefs decode_meta, prefill_meta;
  uint64_t pool_bytes = 0;

  std::vector<Access> accesses() const;  // every op's, in order (the footprint)
};

// Error naming the value when the metadata would make a kernel read or write outside the cache
// or the table (the "Bad input"): a used block-table entry outside [0, num_blocks), a
// slot outside [0, slots) other than a padding row's negative one, a length needing more blocks
// than max_blocks, a slot disagreeing with the block table, a position ≥ max_seq_len (when
// known), rotary_dim above hd (AttnGeometry::check), sizes not matching the extents.
void validate_attn_case(const AttnCase& c);

AttnPlan plan_attention(const AttnCase& c);
// A workspace holding exactly the arena tensors of the plan, and its weight pool.
Workspace allocate_attention_footprint(Backend& backend, const AttnPlan& plan);

// What the backend stored, read back right after each op (empty where the pass has no such op).
struct AttnRun {
  // Prefill staging.
  std::vector<uint16_t> q_copy;     // bf16 [t, nq·hd]
  std::vector<uint16_t> k_scratch;  // bf16 [t, nkv·hd]
  std::vector<uint16_t> v_scratch;  // bf16 [t, nkv·hd]
  std::vector<uint16_t> k_pad;      // bf16 [kv_rows − t, nkv·hd]: phantom rows (zeros)
  std::vector<uint16_t> v_pad;
  // The caches after the decode write (only) and after both writes (what the cores read).
  std::vector<uint16_t> k_cache_decode_write, v_cache_decode_write;
  std::vector<uint16_t> k_cache, v_cache;
  // Cores.
  std::vector<float> partials;        // f32 [R, nq, S, hd + 2] (split-K)
  std::vector<uint16_t> decode_out;   // bf16 [R, nq·hd]: one-split core or merge output
  std::vector<uint16_t> prefill_out;  // bf16 [t, nq·hd]: attn_prefill's rows
  std::vector<uint16_t> attn;         // bf16 [R + t, nq·hd]: attn_output before the gate
  std::vector<uint16_t> gated;        // bf16 [R + t, nq·hd]: after the gate (gated models)
  std::vector<uint16_t> k_cache_end, v_cache_end;  // after the cores (cores write no cache)
};

// Validates, poisons the arena, uploads the case, runs every op of the plan and reads back.
AttnRun run_attention(Backend& backend, const Workspace& ws, const AttnPlan& plan,
                      const AttnCase& c);
// plan + allocate + run in one call (a fresh workspace).
AttnRun run_attention(Backend& backend, const AttnCase& c);

}  // namespace bufferlab::oracle
