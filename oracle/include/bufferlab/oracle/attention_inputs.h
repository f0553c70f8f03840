// Seeded attention passes (attention_harness.h's AttnCase), identical on every platform
// (SplitMix64 and exact arithmetic only: no <random> distributions, no libm in the draws), and
// the case transformations the invariance properties compare runs of.
//
// Choices (docs/spec/attention.md; ops/attention.h pins the layouts):
//   - qkv_output rows: Q, K normal-ish (Irwin–Hall of four uniforms, mean 0, variance 1) times
//     q_scale / k_scale, so a score q·k/sqrt(hd) is ≈ N(0, (q_scale·k_scale)²) before the norm;
//     V normal-ish · v_scale; the gate normal-ish · gate_scale.
//   - The prefix keys already in the cache are what a previous step's cache write left: BF16
//     normal-ish · k_scale (K) and · v_scale (V) — the oracle reads them as stored, so they need
//     not be the staging of any particular token. Every slot no sequence owns holds
//     kAttnCachePoison (NaN): a read through a wrong block or slot shows.
//   - qk_norm weights 1 + normal-ish · norm_w_scale (numerics §1's (1 + w) convention: w
//     normal-ish · norm_w_scale); sinks normal-ish · sink_scale.
//   - Physical blocks: each sequence owns cdiv(len, block_size) blocks, prefill streams first,
//     then the live decode rows; spare_blocks more are owned by nobody. With shuffled_blocks
//     (the default) the physical numbering is a seeded permutation, so "logical block used as
//     the physical one" reads poison or another sequence's keys.
//   - Positions: the RoPE position of the token at sequence position p is p + position_offset.
//     MRoPE (distinct, the default): t = P, h = P + 1 + (i mod 3), w = P + 5 + (i mod 7) with
//     P = p + position_offset and i the row: t ≠ h ≠ w on every token, so a section swap shows.
//     MRoPE equal: t = h = w = P (text tokens).
//   - Decode padding rows (r ≥ live): slot −1 (the cache write skips them), and a live row's
//     seq_len, block-table row and position (row r mod live; row 0's with live = 0): metadata a
//     kernel could follow into real keys, which it must not.
// Every tensor draws from its own stream of the seed, so adding one never shifts another.
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/rope.h"
#include "bufferlab/oracle/attention_harness.h"

namespace bufferlab::oracle {

enum class AttnMropePattern { distinct, equal };  // t ≠ h ≠ w, or t = h = w

struct AttnCaseSpec {
  ModelConfig config;
  bool sliding = false;  // a sliding layer (config.sliding_window > 0 required)
  // The paged cache.
  uint64_t block_size = 16;
  uint64_t spare_blocks = 1;         // physical blocks owned by no sequence (poisoned)
  bool shuffled_blocks = true;       // a seeded permutation of the physical numbering
  uint64_t extra_table_entries = 1;  // block-table entries past the longest sequence's (−1)
  uint64_t max_seq_len = 0;          // recorded in the case for the harness's check (0: none)
  // Prefill part: `streams` streams of L tokens; context[b] keys cached before the chunk
  // (empty: 0 for all; one value: the same for all; else one per stream).
  uint64_t streams = 0, L = 0;
  std::vector<uint64_t> context;
  bool padded_rows = false;  // FP8 path: K/V scratch of ceil16(t) rows
  uint64_t v_row0 = 0;       // V scratch row (0: right after the K rows)
  // Decode part: R rows, the first `live` real; decode_context[r] keys cached before row r's
  // own (seq_len = context + 1; empty: 0, one value: all rows, else one per live row).
  uint64_t decode_rows = 0, live = 0, splits = 1;
  bool verify = false;
  std::vector<uint64_t> decode_context;
  // Positions.
  AttnMropePattern mrope = AttnMropePattern::distinct;
  uint64_t position_offset = 0;
  // Value ranges.
  double q_scale = 1.0, k_scale = 1.0, v_scale = 1.0, gate_scale = 1.0;
  double norm_w_scale = 0.25, sink_scale = 1.0;
};

// The RoPE table operand of a config, rope_table(rope_params(config)) (core/rope.h): inv_freq
// then fp32(attention_factor) (ops/attention.h).
std::vector<float> attn_rope_operand(const ModelConfig& config);

// Error naming the knob: no part at all, L = 0 with streams > 0, a context list of the wrong
// length, live > rows, sliding without a window, block_size = 0, splits = 0.
AttnCase make_attn_case(const AttnCaseSpec& spec, uint64_t seed);

// ---- transformations for the invariance properties -------------------------------------------

// The same pass with the physical blocks renumbered by a seeded permutation (the cache contents
// moved with them, block tables and slots rewritten): every op's output must not change a bit.
AttnCase renumber_blocks(const AttnCase& c, uint64_t seed);
// The prefill part restricted to stream b (one stream, its block-table row, positions, slots and
// qkv rows); the decode part dropped. Same cache.
AttnCase prefill_stream(const AttnCase& c, uint64_t b);
// Rows [i0, i1) of every prefill stream as a chunk of its own: contexts ctx_b + i0, the given
// caches (what the earlier chunk's cache write left: AttnRun::k_cache / v_cache), positions,
// slots and qkv rows of those tokens; the decode part dropped.
AttnCase prefill_chunk(const AttnCase& c, uint64_t i0, uint64_t i1,
                       const std::vector<uint16_t>& k_cache, const std::vector<uint16_t>& v_cache);
// Decode row r alone (R = 1, live 1), its metadata and qkv row; the prefill part dropped.
AttnCase decode_row(const AttnCase& c, uint64_t r);
// The decode part at the same R with only the first n rows live: rows [n, live) become padding
// (slot −1; their metadata stays, plausible). Error: n > live.
AttnCase with_live(const AttnCase& c, uint64_t n);

}  // namespace bufferlab::oracle
