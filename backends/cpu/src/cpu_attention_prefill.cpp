// Varlen causal prefill attention (ops/attention.h "Prefill", docs/spec/attention.md §4): stream
// b's row i sits at p = ctx_b + i and reads keys [lo, p], those below ctx_b from the paged cache
// (block-table row b), the others from the K/V scratch rows b·L + (j − ctx_b). One (row, head)
// item per OpenMP iteration, each reduced by attn::reduce_keys in tiles at absolute positions,
// so a row's bits depend on its position and its keys alone — not on the chunk it is prefilled
// in, the other streams, the block numbering or the thread count.
#include <algorithm>
#include <type_traits>

#include "cpu_attention_common.h"
#include "cpu_ops.h"

namespace bufferlab::cpu {

// Kernel mutants (docs/spec/bug-catalogue.md): M-CAUSAL (the row also sees position p + 1 when its
// stream holds it), M-GQA (KV head q % nkv), M-SINK (the sink term in every acc_d) — per
// item, outside the key loop; M-BLOCK (logical block as physical) a template parameter of the
// cache lookup, which runs per key.
void attn_prefill(const Workspace& ws, const AttnPrefillOp& op, Mutant mutant) {
  const AttnPrefillOp::Bound b = op.bind(ws);
  const AttnPrefillOp::Shape& s = op.shape();
  const AttnGeometry& g = op.geom;
  const uint64_t hd = g.hd, nq = g.nq, group = g.group(), kvw = g.kv_width(), qw = g.q_width();
  const uint64_t L = op.stream_rows(), rows = s.launch.rows;
  const KvCacheGeometry& cache = s.cache;
  // Keys past the block table's capacity are left out like a bad block entry: a ctx_len above
  // it never reads outside the table (the harness refuses such metadata, naming it).
  const uint64_t capacity = cache.max_blocks * cache.block_size;
  const uint64_t window = s.sliding ? s.window : 0;
  const float scale = attn::score_scale(hd);
  const bool leak = mutant == Mutant::M_CAUSAL, gqa_modulo = mutant == Mutant::M_GQA;
  const auto run = [&]<bool LogicalBlocks>(std::bool_constant<LogicalBlocks>) {
    attn::for_each_item(rows * nq, hd * kAttnKeyTile, [&](uint64_t item) {
      const uint64_t row = item / nq, q = item % nq;
      const uint64_t stream = row / L, i = row % L, kvh = gqa_modulo ? q % g.nkv : q / group;
      // A negative ctx_len (bad metadata) counts as an empty prefix.
      const uint64_t ctx = static_cast<uint64_t>(std::max<int32_t>(b.ctx_lens[stream], 0));
      const uint64_t p = ctx + i;
      const uint64_t lo = window > 0 && p + 1 > window ? p + 1 - window : 0;
      const uint64_t end = leak && i + 1 < L ? p + 2 : p + 1;  // M-CAUSAL: within the stream
      const attn::KeySpan spans[2] = {{lo, std::max(lo, std::min(ctx, capacity))},
                                      {std::max(lo, ctx), end}};
      const attn::PagedSequence<LogicalBlocks> seq{b.block_table + stream * cache.max_blocks,
                                                   b.k_cache,
                                                   b.v_cache,
                                                   cache.block_size,
                                                   cache.max_blocks,
                                                   cache.num_blocks,
                                                   kvw,
                                                   kvh * hd};
      const uint16_t* k_scratch = b.k + stream * L * kvw + kvh * hd;
      const uint16_t* v_scratch = b.v + stream * L * kvw + kvh * hd;
      const auto locate = [&](uint64_t j, const uint16_t*& k, const uint16_t*& v) {
        if (j < ctx) return seq.locate(j, k, v);
        k = k_scratch + (j - ctx) * kvw;
        v = v_scratch + (j - ctx) * kvw;
        return true;
      };
      float qf[kMaxAttnHeadDim];
      const uint16_t* qrow = b.q + row * qw + q * hd;
      for (uint64_t d = 0; d < hd; ++d) qf[d] = attn::bf16(qrow[d]);
      attn::OnlineSoftmax st(hd);
      attn::reduce_keys(qf, hd, scale, spans, 2, locate, st);
      if (b.sinks != nullptr) attn::add_sink(st, b.sinks[q], hd, mutant);
      attn::store_output(st, hd, b.out + row * qw + q * hd);
    });
  };
  if (mutant == Mutant::M_BLOCK)
    run(std::true_type{});
  else
    run(std::false_type{});
}

}  // namespace bufferlab::cpu
