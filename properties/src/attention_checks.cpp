// The bit-exact attention invariance bodies (attention_checks.h).
#include "bufferlab/properties/attention_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <set>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"

namespace bufferlab::gen {
namespace {

using oracle::AttnCase;
using oracle::AttnRun;
using U = uint64_t;

constexpr uint16_t kAttnNanBf16 = 0x7FC0;

AttnRun attn_run(Backend& b, const AttnCase& c) { return oracle::run_attention(b, c); }

template <class T>
uint64_t attn_bits(T v) {
  if constexpr (sizeof(T) == 2)
    return v;
  else
    return std::bit_cast<uint32_t>(v);
}

template <class T>
std::string attn_differ(const std::vector<T>& a, const std::vector<T>& b, U cols,
                        const std::string& what) {
  if (a.size() != b.size()) return fmt::format("{}: {} vs {} elements", what, a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (attn_bits(a[i]) != attn_bits(b[i]))
      return fmt::format("{}[{}, {}]: 0x{:x} vs 0x{:x}", what, i / cols, i % cols, attn_bits(a[i]),
                         attn_bits(b[i]));
  return "";
}

// The first non-empty of a list of results.
std::string attn_first(std::initializer_list<std::string> results) {
  for (const std::string& r : results)
    if (!r.empty()) return r;
  return "";
}

// A prefill-only copy of the case (the decode part dropped): rows [0, L) of every stream.
AttnCase attn_prefill_only(const AttnCase& c) {
  return oracle::prefill_chunk(c, 0, c.prefill.L, c.k_cache, c.v_cache);
}

// Sets element `col` of qkv row `row` (host copy) to bf16(v + 1) (a value that differs).
void attn_change(AttnCase& c, U row, U col) {
  uint16_t& e = c.qkv.at(row * c.geom.qkv_dim + col);
  const float v = bf16_bits_to_f32(e);
  e = f32_to_bf16_bits(v + 1.0f);
}

// Every V element of qkv row `row` changed.
void attn_change_v(AttnCase& c, U row) {
  for (U e = 0; e < c.geom.kv_width(); ++e) attn_change(c, row, c.geom.v_col0 + e);
}

// The cache slots of key j of a sequence by its table row.
U attn_slot(const AttnCase& c, const int32_t* row, U j) {
  const U bs = c.cache.block_size;
  return static_cast<U>(row[j / bs]) * bs + j % bs;
}

void attn_nan_slot(AttnCase& c, U slot) {
  const U w = c.geom.kv_width();
  std::fill_n(c.k_cache.begin() + static_cast<std::ptrdiff_t>(slot * w), w, kAttnNanBf16);
  std::fill_n(c.v_cache.begin() + static_cast<std::ptrdiff_t>(slot * w), w, kAttnNanBf16);
}

// Prefill rows of stream b (of L) from a [t, cols] vector.
std::vector<uint16_t> attn_stream_rows(const std::vector<uint16_t>& v, U cols, U L, U b, U i0,
                                       U n) {
  return attn_rows(v, cols, b * L + i0, n);
}

}  // namespace

std::string attn_bits_differ(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, U cols,
                             const std::string& what) {
  return attn_differ(a, b, cols, what);
}
std::string attn_bits_differ(const std::vector<float>& a, const std::vector<float>& b, U cols,
                             const std::string& what) {
  return attn_differ(a, b, cols, what);
}

std::string attn_chunk_invariance(Backend& b, const AttnCase& c, U a, bool plant) {
  const U L = c.prefill.L, S = c.prefill.streams, qw = c.geom.q_width(), kw = c.geom.kv_width();
  if (a == 0 || a >= L) throw Error(fmt::format("attn_chunk_invariance: split {} of {}", a, L));
  const AttnCase whole = attn_prefill_only(c);
  const AttnRun one = attn_run(b, whole);
  const AttnRun r1 = attn_run(b, oracle::prefill_chunk(c, 0, a, c.k_cache, c.v_cache));
  const AttnRun r2 = attn_run(b, oracle::prefill_chunk(c, a, L, plant ? c.k_cache : r1.k_cache,
                                                       plant ? c.v_cache : r1.v_cache));
  for (U s = 0; s < S; ++s) {
    const auto part = [&](const std::vector<uint16_t>& v1, const std::vector<uint16_t>& v2,
                          const std::vector<uint16_t>& whole_v, U cols, const char* what) {
      return attn_first(
          {attn_differ(attn_stream_rows(whole_v, cols, L, s, 0, a), attn_rows(v1, cols, s * a, a),
                       cols, fmt::format("stream {} chunk [0, {}) {}", s, a, what)),
           attn_differ(attn_stream_rows(whole_v, cols, L, s, a, L - a),
                       attn_rows(v2, cols, s * (L - a), L - a), cols,
                       fmt::format("stream {} chunk [{}, {}) {}", s, a, L, what))});
    };
    const std::string r = attn_first(
        {part(r1.q_copy, r2.q_copy, one.q_copy, qw, "q_copy"),
         part(r1.k_scratch, r2.k_scratch, one.k_scratch, kw, "k_scratch"),
         part(r1.v_scratch, r2.v_scratch, one.v_scratch, kw, "v_scratch"),
         part(r1.prefill_out, r2.prefill_out, one.prefill_out, qw, "attention output"),
         whole.geom.gated ? part(r1.gated, r2.gated, one.gated, qw, "gated output") : ""});
    if (!r.empty()) return r;
  }
  return attn_first({attn_differ(r2.k_cache, one.k_cache, kw, "K cache after both chunks"),
                     attn_differ(r2.v_cache, one.v_cache, kw, "V cache after both chunks")});
}

std::string attn_alone_invariance(Backend& b, const AttnCase& c, bool plant) {
  const AttnRun all = attn_run(b, c);
  const U L = c.prefill.L, R = c.decode.rows, qw = c.geom.q_width(), kw = c.geom.kv_width();
  bool planted = false;
  for (U s = 0; s < c.prefill.streams; ++s) {
    AttnCase alone = oracle::prefill_stream(c, s);
    if (plant && !planted) {
      attn_change_v(alone, 0);
      planted = true;
    }
    const AttnRun r = attn_run(b, alone);
    const auto cmp = [&](const std::vector<uint16_t>& whole, const std::vector<uint16_t>& one,
                         U cols, U row0, const char* what) {
      return attn_differ(attn_rows(whole, cols, row0, L), one, cols,
                         fmt::format("stream {} alone: {}", s, what));
    };
    const std::string d =
        attn_first({cmp(all.q_copy, r.q_copy, qw, s * L, "q_copy"),
                    cmp(all.k_scratch, r.k_scratch, kw, s * L, "k_scratch"),
                    cmp(all.v_scratch, r.v_scratch, kw, s * L, "v_scratch"),
                    cmp(all.prefill_out, r.prefill_out, qw, s * L, "attention output"),
                    c.geom.gated ? cmp(all.gated, r.gated, qw, R + s * L, "gated output") : ""});
    if (!d.empty()) return d;
  }
  const U slot = c.decode.splits * (c.geom.hd + 2) * c.geom.nq;  // partial floats per row
  for (U row = 0; row < c.decode.live; ++row) {
    AttnCase alone = oracle::decode_row(c, row);
    if (plant && !planted) {
      attn_change_v(alone, 0);
      planted = true;
    }
    const AttnRun r = attn_run(b, alone);
    const std::string d = attn_first(
        {attn_differ(attn_rows(all.decode_out, qw, row, 1), r.decode_out, qw,
                     fmt::format("decode row {} alone: output", row)),
         c.decode.splits > 1 ? attn_differ(attn_rows(all.partials, slot, row, 1), r.partials, slot,
                                           fmt::format("decode row {} alone: partials", row))
                             : "",
         c.geom.gated ? attn_differ(attn_rows(all.gated, qw, row, 1), r.gated, qw,
                                    fmt::format("decode row {} alone: gated output", row))
                      : ""});
    if (!d.empty()) return d;
  }
  return "";
}

std::string attn_block_numbering_invariance(Backend& b, const AttnCase& c, U seed, bool plant) {
  const AttnRun a = attn_run(b, c);
  AttnCase moved = oracle::renumber_blocks(c, seed);
  if (plant) {  // the cache moved, the metadata not: logical blocks read as physical ones
    moved.prefill = c.prefill;
    moved.decode = c.decode;
  }
  const AttnRun m = attn_run(b, moved);
  const U qw = c.geom.q_width(), kw = c.geom.kv_width();
  const std::string d =
      attn_first({attn_differ(a.q_copy, m.q_copy, qw, "renumbered: q_copy"),
                  attn_differ(a.k_scratch, m.k_scratch, kw, "renumbered: k_scratch"),
                  attn_differ(a.prefill_out, m.prefill_out, qw, "renumbered: prefill output"),
                  attn_differ(a.partials, m.partials, c.geom.hd + 2, "renumbered: partials"),
                  attn_differ(a.decode_out, m.decode_out, qw, "renumbered: decode output"),
                  attn_differ(a.gated, m.gated, qw, "renumbered: gated output")});
  if (!d.empty() || plant) return d;
  // The caches agree through the renumbering: renumber the first run's cache the same way.
  AttnCase after = c;
  after.k_cache = a.k_cache;
  after.v_cache = a.v_cache;
  const AttnCase after_moved = oracle::renumber_blocks(after, seed);
  return attn_first(
      {attn_differ(after_moved.k_cache, m.k_cache, kw, "renumbered: K cache after the writes"),
       attn_differ(after_moved.v_cache, m.v_cache, kw, "renumbered: V cache after the writes")});
}

std::string attn_live_batch_invariance(Backend& b, const AttnCase& c, U n, bool plant) {
  const AttnRun all = attn_run(b, c);
  AttnCase fewer = oracle::with_live(c, n);
  if (plant) attn_change_v(fewer, 0);
  const AttnRun r = attn_run(b, fewer);
  const U qw = c.geom.q_width(), slot = c.decode.splits * (c.geom.hd + 2) * c.geom.nq;
  return attn_first(
      {attn_differ(attn_rows(all.decode_out, qw, 0, n), attn_rows(r.decode_out, qw, 0, n), qw,
                   fmt::format("{} live of {}: output", n, c.decode.live)),
       c.decode.splits > 1
           ? attn_differ(attn_rows(all.partials, slot, 0, n), attn_rows(r.partials, slot, 0, n),
                         slot, fmt::format("{} live of {}: partials", n, c.decode.live))
           : "",
       c.geom.gated ? attn_differ(attn_rows(all.gated, qw, 0, n), attn_rows(r.gated, qw, 0, n), qw,
                                  fmt::format("{} live of {}: gated output", n, c.decode.live))
                    : ""});
}

std::string attn_invisible_keys_invariance(Backend& b, const AttnCase& c, bool plant) {
  const AttnRun base = attn_run(b, c);
  AttnCase nan = c;
  const U W = c.sliding ? c.geom.window : 0, mb = c.cache.max_blocks, L = c.prefill.L,
          R = c.decode.rows, qw = c.geom.q_width();
  const U S = c.prefill.streams;
  if (plant) {  // NaN in a key every sequence's row sees: its first key of the pass
    for (U s = 0; s < S; ++s)
      for (U e = 0; e < c.geom.kv_width(); ++e)
        nan.qkv[(R + s * L) * c.geom.qkv_dim + c.geom.k_col0 + e] = kAttnNanBf16;
    for (U r = 0; r < c.decode.live; ++r)
      for (U e = 0; e < c.geom.kv_width(); ++e)
        nan.qkv[r * c.geom.qkv_dim + c.geom.k_col0 + e] = kAttnNanBf16;
  } else {
    for (U s = 0; s < S; ++s) {
      const U ctx = static_cast<U>(c.prefill.ctx_lens[s]);
      // Below the first row's window (every later row's window starts later).
      const U lo = W > 0 && ctx + 1 > W ? ctx + 1 - W : 0;
      for (U j = 0; j < lo; ++j)
        attn_nan_slot(nan, attn_slot(c, &c.prefill.block_table[s * mb], j));
      // The stream's last token: no earlier row sees it.
      for (U e = 0; e < c.geom.kv_width(); ++e) {
        nan.qkv[(R + s * L + L - 1) * c.geom.qkv_dim + c.geom.k_col0 + e] = kAttnNanBf16;
        nan.qkv[(R + s * L + L - 1) * c.geom.qkv_dim + c.geom.v_col0 + e] = kAttnNanBf16;
      }
    }
    for (U r = 0; r < c.decode.live; ++r) {
      const U p = static_cast<U>(c.decode.seq_lens[r]) - 1;
      const U lo = W > 0 && p + 1 > W ? p + 1 - W : 0;
      for (U j = 0; j < lo; ++j) attn_nan_slot(nan, attn_slot(c, &c.decode.block_table[r * mb], j));
    }
  }
  const AttnRun r = attn_run(b, nan);
  for (U s = 0; s < S; ++s) {
    const U rows = plant ? 1 : L - 1;  // rows before the NaN token (twin: the first row)
    const std::string d = attn_first(
        {attn_differ(attn_rows(base.prefill_out, qw, s * L, rows),
                     attn_rows(r.prefill_out, qw, s * L, rows), qw,
                     fmt::format("stream {} with invisible keys NaN: output", s)),
         c.geom.gated ? attn_differ(attn_rows(base.gated, qw, R + s * L, rows),
                                    attn_rows(r.gated, qw, R + s * L, rows), qw,
                                    fmt::format("stream {} with invisible keys NaN: gated", s))
                      : ""});
    if (!d.empty()) return d;
  }
  return attn_first({attn_differ(attn_rows(base.decode_out, qw, 0, c.decode.live),
                                 attn_rows(r.decode_out, qw, 0, c.decode.live), qw,
                                 "decode with invisible keys NaN: output"),
                     attn_differ(base.partials, r.partials, c.geom.hd + 2,
                                 "decode with invisible keys NaN: partials")});
}

std::string attn_staged_equals_decoded(Backend& b, const AttnCase& c, bool plant) {
  const AttnCase pre = attn_prefill_only(c);
  const AttnRun p = attn_run(b, pre);
  const U L = pre.prefill.L, S = pre.prefill.streams, t = S * L, mb = c.cache.max_blocks;
  AttnCase d = pre;
  d.prefill = {};
  d.k_cache = p.k_cache;  // the prefill's keys in place: the decode write rewrites each one
  d.v_cache = p.v_cache;
  oracle::AttnDecodePart& dp = d.decode;
  dp.rows = dp.live = t;
  dp.splits = 1;
  dp.positions = pre.prefill.positions;
  if (plant)
    for (uint32_t& q : dp.positions) ++q;
  dp.slots = pre.prefill.slots;
  for (U s = 0; s < S; ++s)
    for (U i = 0; i < L; ++i) {
      dp.seq_lens.push_back(pre.prefill.ctx_lens[s] + static_cast<int32_t>(i) + 1);
      dp.block_table.insert(
          dp.block_table.end(),
          pre.prefill.block_table.begin() + static_cast<std::ptrdiff_t>(s * mb),
          pre.prefill.block_table.begin() + static_cast<std::ptrdiff_t>((s + 1) * mb));
    }
  const AttnRun r = attn_run(b, d);
  const U kw = c.geom.kv_width(), qw = c.geom.q_width();
  return attn_first({attn_differ(p.k_cache, r.k_cache_decode_write, kw,
                                 "decoded K written to the cache vs the staged K scratch's"),
                     attn_differ(p.v_cache, r.v_cache_decode_write, kw,
                                 "decoded V written to the cache vs the V scratch's"),
                     attn_differ(p.prefill_out, r.decode_out, qw,
                                 "decode output (one split) vs the prefill output")});
}

std::string attn_mrope_equal_is_1d(Backend& b, const oracle::AttnCaseSpec& spec, U seed,
                                   bool plant) {
  oracle::AttnCaseSpec m = spec;
  m.mrope = plant ? oracle::AttnMropePattern::distinct : oracle::AttnMropePattern::equal;
  oracle::AttnCaseSpec one = spec;
  one.config.mrope_section = {0, 0, 0};
  one.config.mrope_interleaved = false;
  const AttnCase cm = oracle::make_attn_case(m, seed), c1 = oracle::make_attn_case(one, seed);
  if (!cm.geom.mrope) throw Error("attn_mrope_equal_is_1d: the spec's config has no MRoPE");
  const AttnRun rm = attn_run(b, cm), r1 = attn_run(b, c1);
  const U qw = cm.geom.q_width(), kw = cm.geom.kv_width();
  return attn_first(
      {attn_differ(rm.q_copy, r1.q_copy, qw, "MRoPE vs 1-D: q_copy"),
       attn_differ(rm.k_scratch, r1.k_scratch, kw, "MRoPE vs 1-D: k_scratch"),
       attn_differ(rm.k_cache, r1.k_cache, kw, "MRoPE vs 1-D: K cache"),
       attn_differ(rm.prefill_out, r1.prefill_out, qw, "MRoPE vs 1-D: prefill out"),
       attn_differ(rm.partials, r1.partials, cm.geom.hd + 2, "MRoPE vs 1-D: partials"),
       attn_differ(rm.decode_out, r1.decode_out, qw, "MRoPE vs 1-D: decode out")});
}

std::string attn_rotary_pass_through(Backend& b, const AttnCase& c, bool plant) {
  const AttnGeometry& g = c.geom;
  if (g.qk_norm) throw Error("attn_rotary_pass_through: a qk_norm config");
  const AttnRun r = attn_run(b, c);
  const U d0 = plant ? 0 : g.rotary_dim;
  const U R = c.decode.rows, qd = g.qkv_dim;
  // Element d of head h of a staged row vs the qkv bits it came from.
  const auto check = [&](const uint16_t* staged, const uint16_t* src, U heads,
                         const std::string& what) -> std::string {
    for (U h = 0; h < heads; ++h)
      for (U d = d0; d < g.hd; ++d)
        if (staged[h * g.hd + d] != src[h * g.hd + d])
          return fmt::format("{} head {} dim {} (rotary_dim {}): 0x{:x} vs qkv 0x{:x}", what, h, d,
                             g.rotary_dim, staged[h * g.hd + d], src[h * g.hd + d]);
    return "";
  };
  for (U i = 0; i < c.prefill.tokens(); ++i) {
    const uint16_t* src = &c.qkv[(R + i) * qd];
    const std::string d =
        attn_first({check(&r.q_copy[i * g.q_width()], src, g.nq, fmt::format("q_copy row {}", i)),
                    check(&r.k_scratch[i * g.kv_width()], src + g.k_col0, g.nkv,
                          fmt::format("k_scratch row {}", i))});
    if (!d.empty()) return d;
  }
  for (U row = 0; row < c.decode.live; ++row) {
    const U slot = static_cast<U>(c.decode.slots[row]);
    const std::string d =
        check(&r.k_cache_decode_write[slot * g.kv_width()], &c.qkv[row * qd] + g.k_col0, g.nkv,
              fmt::format("decode-written K of row {}", row));
    if (!d.empty()) return d;
  }
  return "";
}

std::string attn_padding_rows(Backend& b, const AttnCase& c, U n, bool plant) {
  const AttnCase base = oracle::with_live(c, n);
  const U R = c.decode.rows, mb = c.cache.max_blocks, bs = c.cache.block_size;
  const U qw = c.geom.q_width(), S = c.decode.splits, hd2 = c.geom.hd + 2;
  const auto used_blocks = [&](U r) {
    std::set<int32_t> out;
    const U len = static_cast<U>(c.decode.seq_lens[r]);
    for (U e = 0; e < (len + bs - 1) / bs; ++e) out.insert(c.decode.block_table[r * mb + e]);
    return out;
  };
  std::set<int32_t> live_blocks;
  for (U r = 0; r < n; ++r)
    for (int32_t blk : used_blocks(r)) live_blocks.insert(blk);
  std::set<int32_t> target;
  if (plant)
    target = used_blocks(0);
  else
    for (U r = n; r < R; ++r)
      for (int32_t blk : used_blocks(r))
        if (!live_blocks.count(blk)) target.insert(blk);
  AttnCase nan = base;
  for (int32_t blk : target)
    for (U j = 0; j < bs; ++j) attn_nan_slot(nan, static_cast<U>(blk) * bs + j);
  const AttnRun clean = attn_run(b, base), poisoned = attn_run(b, nan);
  std::string d = attn_first(
      {attn_differ(attn_rows(clean.decode_out, qw, 0, n), attn_rows(poisoned.decode_out, qw, 0, n),
                   qw, "live rows with the padding rows' blocks NaN: output"),
       S > 1 ? attn_differ(attn_rows(clean.partials, S * hd2 * c.geom.nq, 0, n),
                           attn_rows(poisoned.partials, S * hd2 * c.geom.nq, 0, n), hd2,
                           "live rows with the padding rows' blocks NaN: partials")
             : ""});
  if (!d.empty() || plant) return d;
  for (const AttnRun* run : {&clean, &poisoned}) {
    for (U r = n; r < R; ++r) {
      for (U e = 0; e < qw; ++e)
        if (run->decode_out[r * qw + e] != 0)
          return fmt::format("padding row {} output [{}] = 0x{:x}, not +0", r, e,
                             run->decode_out[r * qw + e]);
      if (S == 1) continue;
      for (U k = 0; k < c.geom.nq * S; ++k) {
        const float* p = &run->partials[(r * c.geom.nq * S + k) * hd2];
        for (U e = 0; e < c.geom.hd; ++e)
          if (std::bit_cast<uint32_t>(p[e]) != 0)
            return fmt::format("padding row {} partial slot {} o[{}] = {}, not +0", r, k, e, p[e]);
        if (!(std::isinf(p[c.geom.hd]) && p[c.geom.hd] < 0) ||
            std::bit_cast<uint32_t>(p[c.geom.hd + 1]) != 0)
          return fmt::format("padding row {} partial slot {}: m = {}, l = {} (−inf, +0 expected)",
                             r, k, p[c.geom.hd], p[c.geom.hd + 1]);
      }
    }
  }
  return "";
}

}  // namespace bufferlab::gen
