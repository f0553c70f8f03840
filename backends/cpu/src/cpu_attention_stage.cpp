// The prefill staging copies and the KV-cache write (ops/attention.h, docs/spec/attention.md
// §2–§3): the Q copy and K scratch through the stage function, the V scratch copied as is, the
// FP8 path's phantom rows written zero; the cache write copies scratch rows to their slots, or
// (decode, verify) stages each qkv row's K heads with the same stage function as the Q copy.
// OpenMP over (row, head) items.
#include <cstring>

#include "cpu_attention_common.h"
#include "cpu_ops.h"

namespace bufferlab::cpu {

// `mutant` M-MROPE: the h and w position streams exchanged (attn::token_positions).
void attn_stage(const Workspace& ws, const AttnStageOp& op, Mutant mutant) {
  const AttnStageOp::Bound b = op.bind(ws);
  const AttnStageOp::Shape& s = op.shape();
  const AttnGeometry& g = op.geom;
  const uint64_t hd = g.hd;
  const bool staged = op.staged();
  attn::for_each_item(s.tokens * s.heads, hd * (staged ? 32 : 1), [&](uint64_t item) {
    const uint64_t i = item / s.heads, h = item % s.heads;
    const uint16_t* x = b.src + i * s.qkv_dim + s.col0 + h * hd;
    uint16_t* y = b.dst + i * s.width + h * hd;
    if (!staged) {
      std::memcpy(y, x, hd * sizeof(uint16_t));
      return;
    }
    attn::stage_head(g, x,
                     attn::token_positions(g, b.positions, op.meta_refs.pos_stride, i, mutant),
                     b.rope, b.norm, y);
  });
  // Phantom rows t..rows−1 (FP8 path): zero, so a GEMM reading them sees finite values.
  if (s.rows > s.tokens)
    std::memset(b.dst + s.tokens * s.width, 0, (s.rows - s.tokens) * s.width * sizeof(uint16_t));
}

void attn_cache_write(const Workspace& ws, const AttnCacheWriteOp& op, Mutant mutant) {
  const AttnCacheWriteOp::Bound b = op.bind(ws);
  const AttnCacheWriteOp::Shape& s = op.shape();
  const AttnGeometry& g = op.geom;
  const uint64_t hd = g.hd, kvw = g.kv_width();
  const uint64_t slots = s.cache.num_blocks * s.cache.block_size;  // bind checked the product
  const bool qkv = op.source == AttnCacheWriteOp::Source::qkv;
  const uint64_t k_col = qkv ? g.k_col0 : 0, v_col = qkv ? g.v_col0 : 0;
  attn::for_each_item(s.rows * g.nkv, hd * (qkv ? 32 : 1), [&](uint64_t item) {
    const uint64_t i = item / g.nkv, h = item % g.nkv;
    // A slot outside the cache (negative: a padding row) is skipped, never dereferenced.
    const int64_t slot = b.slots[i];
    if (slot < 0 || static_cast<uint64_t>(slot) >= slots) return;
    const uint64_t at = static_cast<uint64_t>(slot) * kvw + h * hd;
    const uint16_t* k = b.k_src + i * b.src_stride + k_col + h * hd;
    const uint16_t* v = b.v_src + i * b.src_stride + v_col + h * hd;
    if (qkv)
      attn::stage_head(g, k,
                       attn::token_positions(g, b.positions, op.meta_refs.pos_stride, i, mutant),
                       b.rope, b.k_norm, b.k_cache + at);
    else
      std::memcpy(b.k_cache + at, k, hd * sizeof(uint16_t));
    std::memcpy(b.v_cache + at, v, hd * sizeof(uint16_t));
  });
}

}  // namespace bufferlab::cpu
