// What the CPU (bench/cpu/bench_attention.cpp) and CUDA (bench/cuda/bench_cuda_attention.cu)
// attention benches share, so both time the same work: the attention layers benchmarked, the
// case spec of a prefill or decode pass (oracle/attention_inputs.h), the keys each query row
// sees (ops/attention.h "The core") and the FLOP and byte counts the ratios divide by.
//
// FLOP model: a query row at sequence position p sees v(p) = min(p + 1, W) keys on a sliding
// layer of window W, else p + 1; each (row, query head) costs 2·hd flops for the scores q·k and
// 2·hd for Σ e·v, so a launch costs 4·hd·nq·Σ_rows v(p). The softmax's exp and the rescales
// (O(v) and O(hd) per tile) are not counted: they are the same for any implementation.
// Bytes: the KV bytes a decode row reads are v(p)·nkv·hd·2 (BF16) for K and again for V.
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/core/presets.h"
#include "bufferlab/core/target.h"
#include "bufferlab/oracle/attention_inputs.h"

namespace bufferlab::bench {

// One attention layer as the benches name it.
struct AttnModel {
  const char* tag;     // the benchmark name's model part
  const char* preset;  // core/presets.h
  bool sliding;        // a sliding-window layer
};

// Qwen3-Next (nq 16, nkv 2, hd 256; gated, qk_norm, partial rotary 0.25), gpt-oss (nq 64,
// nkv 8, hd 64; sinks, yarn) on a full and on a sliding layer (window 128), Llama 3.1
// (nq 32, nkv 8, hd 128; llama3 scaling).
inline constexpr AttnModel kAttnModels[] = {{"qwen3_next_80b", "qwen3-next-80b", false},
                                            {"gpt_oss_20b", "gpt-oss-20b", false},
                                            {"gpt_oss_20b_sliding", "gpt-oss-20b", true},
                                            {"llama_3_1_8b", "llama-3.1-8b", false}};

inline constexpr uint64_t kAttnBenchSeed = 0xA77E;

inline double attn_u(uint64_t x) { return static_cast<double>(x); }

// Keys the query at sequence position p sees (window 0: a full layer).
inline uint64_t attn_visible(uint64_t p, uint64_t window) {
  return window > 0 && p + 1 > window ? window : p + 1;
}

inline uint64_t attn_window(const AttnModel& m, const AttnGeometry& g) {
  return m.sliding ? g.window : 0;
}

// One prefill stream of `tokens` rows after `context` keys already in the paged cache.
inline oracle::AttnCaseSpec attn_prefill_spec(const AttnModel& m, uint64_t tokens,
                                              uint64_t context) {
  oracle::AttnCaseSpec s;
  s.config = preset(m.preset);
  s.sliding = m.sliding;
  s.streams = 1;
  s.L = tokens;
  s.context = {context};
  return s;
}

// `rows` live decode rows, each with `context` keys cached before its own.
inline oracle::AttnCaseSpec attn_decode_spec(const AttnModel& m, uint64_t rows, uint64_t context,
                                             uint64_t splits) {
  oracle::AttnCaseSpec s;
  s.config = preset(m.preset);
  s.sliding = m.sliding;
  s.decode_rows = rows;
  s.live = rows;
  s.splits = splits;
  s.decode_context = {context};
  return s;
}

// The split count the H200 target's sizing gives a decode step of `rows` rows
// (core/target.h splitk_splits, the automatic policy).
inline uint64_t attn_h200_splits(const AttnModel& m, uint64_t rows) {
  return splitk_splits(Target::named("h200"), preset(m.preset).num_attention_heads, rows);
}

// Σ v(p) over the rows of one prefill stream of `tokens` rows after `context` keys.
inline uint64_t attn_prefill_keys(uint64_t tokens, uint64_t context, uint64_t window) {
  uint64_t keys = 0;
  for (uint64_t i = 0; i < tokens; ++i) keys += attn_visible(context + i, window);
  return keys;
}

// 4·hd·nq flops per (row, key) pair: scores and values (the header's FLOP model).
inline double attn_flops(const AttnGeometry& g, uint64_t row_keys) {
  return 4.0 * attn_u(g.hd) * attn_u(g.nq) * attn_u(row_keys);
}

// The K and V bytes `rows` decode rows with `context` cached keys each read (own key included).
inline uint64_t attn_decode_kv_bytes(const AttnGeometry& g, uint64_t rows, uint64_t context,
                                     uint64_t window) {
  return rows * attn_visible(context, window) * g.kv_width() * 2 * 2;
}

}  // namespace bufferlab::bench
