// Shared pieces of the CPU attention kernels (ops/attention.h, docs/spec/attention.md §2, §4):
// the stage function S (qk_norm, RoPE, one BF16 store) that the Q copy, the K scratch, the
// decode cache write and the decode core all call — one code path, so a token's staged and
// decoded Q/K agree bit for bit — and the key reduction (online softmax over tiles of
// kAttnKeyTile ABSOLUTE key positions) that the prefill and decode cores both call, so a row's
// reduction order depends on its position alone. Private to the CPU backend; FP32 throughout.
#pragma once

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/core/sizing.h"
#include "cpu_parallel.h"

namespace bufferlab::cpu::attn {

// a · b rounded on its own. RoPE's products and sums each round (docs/spec/attention.md §2: no
// FMA): the empty asm turns the product into a value the compiler cannot see through, so it cannot
// fuse it with the sum that consumes it, whatever -ffp-contract and -march say.
inline float mul_rn(float a, float b) {
  float p = a * b;
#if defined(__x86_64__) || defined(__i386__)
  __asm__("" : "+x"(p));
#else
  __asm__("" : "+m"(p));
#endif
  return p;
}

inline float bf16(uint16_t bits) { return bf16_bits_to_f32(bits); }

// The position stream (0 = t, 1 = h, 2 = w) frequency i takes its angle from
// (docs/spec/attention.md §2).
inline uint64_t position_stream(const AttnGeometry& g, uint64_t i) {
  if (!g.mrope) return 0;
  const auto& s = g.mrope_section;
  if (g.mrope_interleaved) {
    if (i % 3 == 1 && i < 3 * s[1]) return 1;
    if (i % 3 == 2 && i < 3 * s[2]) return 2;
    return 0;
  }
  if (i >= s[0] && i < s[0] + s[1]) return 1;
  if (i >= s[0] + s[1] && i < s[0] + s[1] + s[2]) return 2;
  return 0;
}

// Token i's positions, one per stream: positions[stream·stride + i] (ops/attention.h).
struct TokenPositions {
  uint32_t p[3] = {0, 0, 0};
};
// Kernel mutant M-MROPE (docs/spec/bug-catalogue.md) exchanges the h and w streams: the
// frequencies of the h section turn with the w position and the other way round — the same as
// swapping the two positions before the stage function, so the stage function itself (and its
// inner loop) stays the real one.
inline TokenPositions token_positions(const AttnGeometry& g, const uint32_t* positions,
                                      uint64_t stride, uint64_t i, Mutant mutant = Mutant::none) {
  TokenPositions t;
  for (uint64_t s = 0; s < g.pos_streams(); ++s) t.p[s] = positions[s * stride + i];
  if (mutant == Mutant::M_MROPE && g.pos_streams() == 3) {
    const uint32_t h = t.p[1];
    t.p[1] = t.p[2];
    t.p[2] = h;
  }
  return t;
}

// The stage function S of one Q or K head row (ops/attention.h "The stage function"): x the
// head's hd BF16 values, `norm` its qk_norm weight (nullptr: no qk_norm), `rope` the table
// [rotary_dim/2 inv_freq | attention_factor]; out gets hd BF16 values. Without qk_norm the
// dimensions ≥ rotary_dim are copied as bits: the same as bf16(fp32(x)) for every value, and a
// NaN keeps its payload too (docs/spec/attention.md §2: they pass through bit for bit).
inline void stage_head(const AttnGeometry& g, const uint16_t* x, const TokenPositions& pos,
                       const float* rope, const uint16_t* norm, uint16_t* out) {
  const uint64_t hd = g.hd, half = g.rotary_dim / 2;
  float n[kMaxAttnHeadDim];
  if (norm != nullptr) {
    float ss = 0.0f;
    for (uint64_t i = 0; i < hd; ++i) {
      const float xi = bf16(x[i]);
      ss += xi * xi;
    }
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(hd) + g.eps);
    for (uint64_t i = 0; i < hd; ++i) n[i] = (bf16(x[i]) * inv) * (1.0f + bf16(norm[i]));
  } else {
    for (uint64_t i = 0; i < hd; ++i) n[i] = bf16(x[i]);
  }
  const float af = rope[half];
  for (uint64_t i = 0; i < half; ++i) {
    const uint64_t ia = g.rope_interleaved ? 2 * i : i;
    const uint64_t ib = g.rope_interleaved ? 2 * i + 1 : i + half;
    const float theta = mul_rn(static_cast<float>(pos.p[position_stream(g, i)]), rope[i]);
    const float c = mul_rn(std::cos(theta), af);
    const float s = mul_rn(std::sin(theta), af);
    const float a = n[ia], b = n[ib];
    n[ia] = mul_rn(a, c) - mul_rn(b, s);
    n[ib] = mul_rn(b, c) + mul_rn(a, s);
  }
  for (uint64_t i = 0; i < hd; ++i) out[i] = f32_to_bf16_bits(n[i]);
  if (norm == nullptr)
    for (uint64_t i = g.rotary_dim; i < hd; ++i) out[i] = x[i];
}

// fp32(1/sqrt(hd)): the score scale, 1/sqrt evaluated in FP64 and rounded once (exact for the
// square head dims 64, 128 and 256's 1/16).
inline float score_scale(uint64_t hd) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
}

// Keys [begin, end) of a row's visible range (absolute positions).
struct KeySpan {
  uint64_t begin = 0, end = 0;
};

// The running state of one (row, head) reduction: m, l and acc_d of ops/attention.h's rule.
// `started` is false until a tile with a visible key has been reduced (its α is 0).
struct OnlineSoftmax {
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  bool started = false;
  float acc[kMaxAttnHeadDim];

  explicit OnlineSoftmax(uint64_t hd) {
    for (uint64_t d = 0; d < hd; ++d) acc[d] = 0.0f;
  }
};

// Reduces the keys of `spans` (ascending, disjoint, n of them) into `st`, in tiles of
// kAttnKeyTile absolute positions [64u, 64u + 64), tiles ascending, keys ascending inside a
// tile. locate(j, k, v) gives key j's K and V head rows (hd BF16 each) or returns false for a
// key that metadata leaves out (a block entry outside the cache): such a key, like every key
// outside the spans, is never scored nor its V read (docs/spec/attention.md §4: masking by
// selection). A tile with no key is skipped. q: the query's hd FP32 values (BF16-exact); scale:
// score_scale.
template <class Locate>
void reduce_keys(const float* q, uint64_t hd, float scale, const KeySpan* spans, int n,
                 Locate&& locate, OnlineSoftmax& st) {
  constexpr uint64_t T = kAttnKeyTile;
  float score[T];
  const uint16_t* krow[T];
  const uint16_t* vrow[T];
  // The first key position at or after `from` in any span (none: UINT64_MAX).
  const auto next_key = [&](uint64_t from) {
    uint64_t next = UINT64_MAX;
    for (int s = 0; s < n; ++s) {
      const uint64_t j = spans[s].begin > from ? spans[s].begin : from;
      if (j < spans[s].end && j < next) next = j;
    }
    return next;
  };
  for (uint64_t key = next_key(0); key != UINT64_MAX;) {
    const uint64_t t0 = key / T * T, t1 = t0 + T;
    uint64_t count = 0;
    for (int s = 0; s < n; ++s) {
      const uint64_t b = spans[s].begin > t0 ? spans[s].begin : t0;
      const uint64_t e = spans[s].end < t1 ? spans[s].end : t1;
      for (uint64_t j = b; j < e; ++j)
        if (locate(j, krow[count], vrow[count])) ++count;
    }
    // Scores: each dot its own FP32 sum over d ascending; four keys at a time only so that
    // four independent sums overlap (the same operations per key, in the same order).
    uint64_t c = 0;
    for (; c + 4 <= count; c += 4) {
      const uint16_t *k0 = krow[c], *k1 = krow[c + 1], *k2 = krow[c + 2], *k3 = krow[c + 3];
      float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
      for (uint64_t d = 0; d < hd; ++d) {
        const float qd = q[d];
        d0 += qd * bf16(k0[d]);
        d1 += qd * bf16(k1[d]);
        d2 += qd * bf16(k2[d]);
        d3 += qd * bf16(k3[d]);
      }
      score[c] = d0 * scale;
      score[c + 1] = d1 * scale;
      score[c + 2] = d2 * scale;
      score[c + 3] = d3 * scale;
    }
    for (; c < count; ++c) {
      float dot = 0.0f;
      for (uint64_t d = 0; d < hd; ++d) dot += q[d] * bf16(krow[c][d]);
      score[c] = dot * scale;
    }
    float tmax = count > 0 ? score[0] : 0.0f;
    for (c = 1; c < count; ++c)
      if (score[c] > tmax) tmax = score[c];
    if (count > 0) {
      const float m_new = !st.started ? tmax : (tmax > st.m ? tmax : st.m);
      const float alpha = st.started ? std::exp(st.m - m_new) : 0.0f;
      st.l *= alpha;
      for (uint64_t d = 0; d < hd; ++d) st.acc[d] *= alpha;
      for (uint64_t i = 0; i < count; ++i) {
        const float e = std::exp(score[i] - m_new);
        st.l += e;
        const uint16_t* v = vrow[i];
        for (uint64_t d = 0; d < hd; ++d) st.acc[d] += e * bf16(v[d]);
      }
      st.m = m_new;
      st.started = true;
    }
    key = next_key(t1);
  }
}

// The sink logit joins m and l at the end, with no value row (ops/attention.h). Kernel mutant
// M-SINK adds its term to every acc_d as well, as if the sink had a value row of ones.
inline void add_sink(OnlineSoftmax& st, float sink, uint64_t hd, Mutant mutant = Mutant::none) {
  const float m2 = !st.started ? sink : (sink > st.m ? sink : st.m);
  const float alpha = st.started ? std::exp(st.m - m2) : 0.0f;
  const float e = std::exp(sink - m2);
  st.l = st.l * alpha + e;
  for (uint64_t d = 0; d < hd; ++d) st.acc[d] *= alpha;
  if (mutant == Mutant::M_SINK)
    for (uint64_t d = 0; d < hd; ++d) st.acc[d] += e;
  st.m = m2;
  st.started = true;
}

// o_d = bf16(acc_d / l). A row with no key and no sink (l = 0: every visible key left out by
// metadata the harness refuses) writes zeros rather than 0/0 — a choice the header leaves open.
inline void store_output(const OnlineSoftmax& st, uint64_t hd, uint16_t* out) {
  for (uint64_t d = 0; d < hd; ++d)
    out[d] = st.l == 0.0f ? uint16_t{0} : f32_to_bf16_bits(st.acc[d] / st.l);
}

// body(item) for item in [0, items), (row, head) items: on the OpenMP team (dynamic schedule:
// causal rows differ in work) when items · work_per_item (a rough count of one item's inner
// operations: it only decides serial or team) reaches kParallelMinWork and more than one thread
// is available, else in order. Each item's arithmetic is the same either way.
template <class Body>
void for_each_item(uint64_t items, uint64_t work_per_item, Body&& body) {
  const bool parallel = items > 1 && items * work_per_item >= kParallelMinWork;
  if (!runs_in_team(parallel)) {
    for (uint64_t i = 0; i < items; ++i) body(i);
    return;
  }
  parallel_items(static_cast<int64_t>(items), omp_get_max_threads(),
                 [&](int64_t item, int) { body(static_cast<uint64_t>(item)); });
}

// Key j of a paged sequence whose block-table row is `table` (max_blocks entries): the K and V
// head rows of its slot, or false when its logical block lies past the table or its entry
// outside [0, num_blocks) (never dereferenced: ops/attention.h "Paged cache").
// LogicalBlocks is kernel mutant M-BLOCK: the logical block index used as the physical one
// (still never past the cache) — a template parameter, so the real lookup is what it was.
template <bool LogicalBlocks = false>
struct PagedSequence {
  const int32_t* table = nullptr;
  const uint16_t* k_cache = nullptr;
  const uint16_t* v_cache = nullptr;
  uint64_t block_size = 1, max_blocks = 0, num_blocks = 0, kv_width = 0, head_offset = 0;

  bool locate(uint64_t j, const uint16_t*& k, const uint16_t*& v) const {
    const uint64_t block = j / block_size;
    if (block >= max_blocks) return false;
    const int64_t entry = table[block];
    if (entry < 0 || static_cast<uint64_t>(entry) >= num_blocks) return false;
    const uint64_t physical = LogicalBlocks ? block : static_cast<uint64_t>(entry);
    if (LogicalBlocks && physical >= num_blocks) return false;
    const uint64_t slot = physical * block_size + j % block_size;
    const uint64_t at = slot * kv_width + head_offset;
    k = k_cache + at;
    v = v_cache + at;
    return true;
  }
};

}  // namespace bufferlab::cpu::attn
