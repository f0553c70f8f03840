// Decode / verify attention and the split-K merge (ops/attention.h "Decode / verify row",
// "Split-K", docs/spec/numerics.md §8): row r's query is the stage function of its qkv row's Q
// head (the code of the Q copy), p = seq_lens[r] − 1, keys [lo, p] from the paged cache reduced
// by attn::reduce_keys; one split writes bf16(acc / l) with the sink joined, split-K writes each
// part's [o | m | l] and leaves the sink to the merge. Rows ≥ live read nothing and write zeros.
// One (row, head) item per OpenMP iteration.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "bufferlab/core/error.h"
#include "cpu_attention_common.h"
#include "cpu_ops.h"

namespace bufferlab::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// An empty part: o = 0, m = −inf, l = 0 (the merge skips it).
void write_empty_partial(float* slot, uint64_t hd) {
  for (uint64_t d = 0; d < hd; ++d) slot[d] = 0.0f;
  slot[hd] = kNegInf;
  slot[hd + 1] = 0.0f;
}

}  // namespace

// Kernel mutants (docs/spec/bug-catalogue.md): M-CAUSAL (the row also sees position p + 1 when
// the cache holds it), M-GQA (KV head q % nkv), M-MROPE (the query's h and w streams
// exchanged), M-SINK (one split: the sink term in every acc_d) — per item, outside the key loop;
// M-BLOCK (logical block as physical) a template parameter of the cache lookup.
void attn_decode(const Workspace& ws, const AttnDecodeOp& op, Mutant mutant) {
  const AttnDecodeOp::Bound b = op.bind(ws);
  const AttnDecodeOp::Shape& s = op.shape();
  const AttnGeometry& g = op.geom;
  const uint64_t hd = g.hd, nq = g.nq, group = g.group(), kvw = g.kv_width(), qw = g.q_width();
  const uint64_t splits = s.splits, bs = s.cache.block_size;
  const KvCacheGeometry& cache = s.cache;
  // Keys past the block table's capacity are left out like a bad block entry (a seq_len above
  // it never reads outside the table; the harness refuses such metadata, naming it). The
  // split-K parts cut the visible blocks of the range so clipped.
  const uint64_t capacity = cache.max_blocks * bs;
  const uint64_t window = s.sliding ? s.window : 0;
  const float scale = attn::score_scale(hd);
  const bool leak = mutant == Mutant::M_CAUSAL, gqa_modulo = mutant == Mutant::M_GQA;
  const auto run = [&]<bool LogicalBlocks>(std::bool_constant<LogicalBlocks>) {
    attn::for_each_item(s.rows * nq, hd * kAttnKeyTile, [&](uint64_t item) {
      const uint64_t r = item / nq, q = item % nq, kvh = gqa_modulo ? q % g.nkv : q / group;
      float* partials = op.split_k() ? b.partials + (r * nq + q) * splits * (hd + 2) : nullptr;
      uint16_t* out = op.split_k() ? nullptr : b.out + r * qw + q * hd;
      if (r >= s.live) {  // padding: nothing read
        if (partials != nullptr)
          for (uint64_t k = 0; k < splits; ++k) write_empty_partial(partials + k * (hd + 2), hd);
        else
          std::memset(out, 0, hd * sizeof(uint16_t));
        return;
      }
      uint16_t qbits[kMaxAttnHeadDim];
      attn::stage_head(g, b.qkv + r * s.qkv_dim + q * hd,
                       attn::token_positions(g, b.positions, op.meta_refs.pos_stride, r, mutant),
                       b.rope, b.q_norm, qbits);
      float qf[kMaxAttnHeadDim];
      for (uint64_t d = 0; d < hd; ++d) qf[d] = attn::bf16(qbits[d]);
      const attn::PagedSequence<LogicalBlocks> seq{b.block_table + r * cache.max_blocks,
                                                   b.k_cache,
                                                   b.v_cache,
                                                   bs,
                                                   cache.max_blocks,
                                                   cache.num_blocks,
                                                   kvw,
                                                   kvh * hd};
      const auto locate = [&](uint64_t j, const uint16_t*& k, const uint16_t*& v) {
        return seq.locate(j, k, v);
      };
      // Visible keys [lo, hi): p = seq_len − 1 (no key when seq_len ≤ 0).
      const int64_t p = static_cast<int64_t>(b.seq_lens[r]) - 1;
      uint64_t end = p < 0 ? 0 : static_cast<uint64_t>(p) + 1;
      const uint64_t lo = window > 0 && end > window ? end - window : 0;
      if (leak && p >= 0) {  // M-CAUSAL: key p + 1 too, when the block table maps it
        const uint16_t* k = nullptr;
        const uint16_t* v = nullptr;
        if (locate(end, k, v)) ++end;
      }
      const uint64_t hi = std::max(lo, std::min(end, capacity));
      if (partials == nullptr) {
        const attn::KeySpan span{lo, hi};
        attn::OnlineSoftmax st(hd);
        attn::reduce_keys(qf, hd, scale, &span, 1, locate, st);
        if (b.sinks != nullptr) attn::add_sink(st, b.sinks[q], hd, mutant);
        attn::store_output(st, hd, out);
        return;
      }
      // Blocks b0 = lo / bs … b1 = (hi − 1) / bs in S contiguous parts of cdiv(b1 − b0 + 1, S).
      const uint64_t b0 = lo / bs, nblocks = hi > lo ? (hi - 1) / bs - b0 + 1 : 0;
      const uint64_t per = (nblocks + splits - 1) / splits;
      for (uint64_t k = 0; k < splits; ++k) {
        float* slot = partials + k * (hd + 2);
        const uint64_t first = std::min(nblocks, k * per), last = std::min(nblocks, (k + 1) * per);
        const attn::KeySpan span{std::max(lo, (b0 + first) * bs), std::min(hi, (b0 + last) * bs)};
        attn::OnlineSoftmax st(hd);
        if (span.begin < span.end) attn::reduce_keys(qf, hd, scale, &span, 1, locate, st);
        if (!st.started) {
          write_empty_partial(slot, hd);
          continue;
        }
        for (uint64_t d = 0; d < hd; ++d) slot[d] = st.acc[d] / st.l;
        slot[hd] = st.m;
        slot[hd + 1] = st.l;
      }
    });
  };
  if (mutant == Mutant::M_BLOCK)
    run(std::true_type{});
  else
    run(std::false_type{});
}

// Kernel mutants: M-MERGE (w_k = l_k, without the max rescale e^(m_k − m)); M-SINK (the sink
// term added to every acc_d as well as to l). Both per (row, head), outside the d loops.
void splitk_merge(const Workspace& ws, const SplitKMergeOp& op, Mutant mutant) {
  const SplitKMergeOp::Bound b = op.bind(ws);
  const SplitKMergeOp::Shape& s = op.shape();
  const uint64_t hd = s.hd, nq = s.nq, splits = s.splits;
  // The merge's descriptor carries no AttnGeometry (whose check() the other binds run): its
  // stack accumulator holds kMaxAttnHeadDim values.
  if (hd > kMaxAttnHeadDim)
    throw Error(op.params() + ": head_dim = " + std::to_string(hd) + " is above the kernels' " +
                std::to_string(kMaxAttnHeadDim));
  attn::for_each_item(s.rows * nq, hd * splits, [&](uint64_t item) {
    const uint64_t r = item / nq, q = item % nq;
    uint16_t* out = b.out + (r * nq + q) * hd;
    if (r >= s.live) {
      std::memset(out, 0, hd * sizeof(uint16_t));
      return;
    }
    const float* parts = b.partials + (r * nq + q) * splits * (hd + 2);
    // m: the largest m_k of the parts with l_k > 0, and the sink. Only an empty part (l_k = 0
    // exactly) is skipped: a NaN l_k (a NaN among the visible keys) joins and shows.
    bool any = false;
    float m = kNegInf;
    for (uint64_t k = 0; k < splits; ++k) {
      const float* part = parts + k * (hd + 2);
      if (part[hd + 1] == 0.0f) continue;
      if (!any || part[hd] > m) m = part[hd];
      any = true;
    }
    if (b.sinks != nullptr) {
      const float sink = b.sinks[q];
      if (!any || sink > m) m = sink;
      any = true;
    }
    float acc[kMaxAttnHeadDim];
    for (uint64_t d = 0; d < hd; ++d) acc[d] = 0.0f;
    float l = 0.0f;
    for (uint64_t k = 0; k < splits; ++k) {
      const float* part = parts + k * (hd + 2);
      if (part[hd + 1] == 0.0f) continue;
      const float w =
          mutant == Mutant::M_MERGE ? part[hd + 1] : part[hd + 1] * std::exp(part[hd] - m);
      l += w;
      for (uint64_t d = 0; d < hd; ++d) acc[d] += w * part[d];
    }
    if (b.sinks != nullptr) {
      const float e = std::exp(b.sinks[q] - m);
      l += e;
      if (mutant == Mutant::M_SINK)
        for (uint64_t d = 0; d < hd; ++d) acc[d] += e;
    }
    // No part with a key and no sink (metadata the harness refuses): zeros, as in the core.
    for (uint64_t d = 0; d < hd; ++d)
      out[d] = l == 0.0f ? uint16_t{0} : f32_to_bf16_bits(acc[d] / l);
  });
}

}  // namespace bufferlab::cpu
