// QSA sparse-attention indexer (docs/spec/buffers.md §4.8, docs/spec/numerics.md §8). The indexer
// runs per slab of ≤ 2048 prefill rows and the slab's attention core must read its lists before the
// next slab overwrites them, so the attention emitters interleave emit_qsa_slab with their
// cores. Decode rows select inside the decode kernel and never touch the scratch.
#include <algorithm>
#include <vector>

#include "bufferlab/core/ops/qsa.h"
#include "builder.h"
#include "emit_attention_parts.h"

namespace bufferlab::plan::detail {

bool qsa_selects(const Ctx& c) {
  return c.config.index_topk > 0 && c.config.index_compress_ratio > 0;
}

std::vector<PrefillLaunch> prefill_launches(const Ctx& c) {
  const uint64_t t = c.pass.prefill_tokens();
  if (t == 0) return {};
  const PrefillLaunch whole{c.pass.decode_rows(), t,
                            std::max<uint64_t>(c.pass.prefill_streams(), 1), 0, t};
  if (!qsa_selects(c)) return {whole};
  std::vector<PrefillLaunch> slabs;
  for (uint64_t row0 = 0; row0 < t; row0 += QsaScratchLayout::kSlabRows) {
    PrefillLaunch slab = whole;
    slab.row0 = row0;
    slab.rows = std::min<uint64_t>(QsaScratchLayout::kSlabRows, t - row0);
    slabs.push_back(slab);
  }
  return slabs;
}

TensorRef emit_qsa_slab(Builder& b, const Ctx& c, const PrefillLaunch& slab) {
  using Stage = QsaIndexerOp::Stage;
  const uint64_t seq = c.shape.max_seq_len;  // score columns: a run-shape dimension (§4.8)
  b.add(QsaIndexerOp::make(c.config, Stage::qk, seq, slab));
  b.add(QsaIndexerOp::make(c.config, Stage::prep, seq, slab, attn_meta(c, {"positions", "slots"})));
  b.add(QsaIndexerOp::make(c.config, Stage::score, seq, slab,
                           attn_meta(c, {"block_table", "seq_lens", "cu_seqlens", "kv_lens"})));
  const QsaIndexerOp topk = QsaIndexerOp::make(c.config, Stage::topk, seq, slab,
                                               attn_meta(c, {"seq_lens", "cu_seqlens"}));
  b.add(topk);
  return topk.out;
}

// The indexer alone over every prefill slab. The attention emitters do not call this: they
// interleave emit_qsa_slab with their cores (a later slab overwrites the lists).
void emit_qsa(Builder& b, const Ctx& c) {
  if (!qsa_selects(c)) return;
  for (const PrefillLaunch& slab : prefill_launches(c)) emit_qsa_slab(b, c, slab);
}

}  // namespace bufferlab::plan::detail
