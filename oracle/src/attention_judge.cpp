// Stage-by-stage judgement of one attention pass (attention_judge.h): each stage's reference
// (attention.h) fed what the backend stored before it, under the bounds of attention_bounds.cpp;
// copies and untouched cache slots bit for bit; the core failures diagnosed by the named bug they
// match (causal leak, GQA map).
#include "bufferlab/oracle/attention_judge.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounded_compare.h"
#include "oracle_common.h"

namespace bufferlab::oracle {

namespace attn_judge {
namespace {

constexpr double kAttnInf = std::numeric_limits<double>::infinity();

// --- the case's layout ------------------------------------------------------------------------

struct AttnLayout {
  const AttnCase& c;
  const AttnGeometry& g;
  uint64_t R, live, t, L, S, bs, window, slots;

  explicit AttnLayout(const AttnCase& cs)
      : c(cs),
        g(cs.geom),
        R(cs.decode.rows),
        live(cs.decode.live),
        t(cs.prefill.tokens()),
        L(cs.prefill.L),
        S(std::max<uint64_t>(cs.decode.splits, 1)),
        bs(cs.cache.block_size),
        window(cs.sliding ? cs.geom.window : 0),
        slots(cs.cache.num_blocks * cs.cache.block_size) {}

  uint64_t ctx(uint64_t b) const { return static_cast<uint64_t>(c.prefill.ctx_lens.at(b)); }
  uint64_t seq_len(uint64_t r) const { return static_cast<uint64_t>(c.decode.seq_lens.at(r)); }
  // The physical slot of key j of a sequence (a block-table row), or −1 where the entry is no
  // block of the cache.
  int64_t slot_of(const std::vector<int32_t>& table, uint64_t rows, uint64_t row,
                  uint64_t j) const {
    const uint64_t max_blocks = rows == 0 ? 0 : table.size() / rows;
    if (j / bs >= max_blocks) return -1;
    const int32_t blk = table[row * max_blocks + j / bs];
    if (blk < 0 || static_cast<uint64_t>(blk) >= c.cache.num_blocks) return -1;
    return static_cast<int64_t>(static_cast<uint64_t>(blk) * bs + j % bs);
  }
  bool split_k() const { return c.decode.splits > 1; }
};

AttnStageInput stage_input(const AttnLayout& l, bool decode, bool k_part) {
  AttnStageInput in;
  const uint64_t row0 = decode ? 0 : l.R;
  in.src = std::span<const uint16_t>(l.c.qkv).subspan(row0 * l.g.qkv_dim);
  in.stride = l.g.qkv_dim;
  in.col0 = k_part ? l.g.k_col0 : 0;
  in.rows = decode ? l.R : l.t;
  in.heads = k_part ? l.g.nkv : l.g.nq;
  in.positions = decode ? l.c.decode.positions : l.c.prefill.positions;
  in.pos_stride = in.rows;
  in.rope = l.c.rope;
  in.norm = k_part ? l.c.k_norm : l.c.q_norm;
  return in;
}

// --- coordinates --------------------------------------------------------------------------------

Where prefill_where(const AttnLayout& l) {
  return [l](uint64_t row, uint64_t col) {
    const uint64_t b = row / l.L, i = row % l.L;
    return fmt::format("sequence {} (prefill stream), token {} (position {}), head {}, dim {}", b,
                       i, l.ctx(b) + i, col / l.g.hd, col % l.g.hd);
  };
}

Where decode_where(const AttnLayout& l) {
  return [l](uint64_t row, uint64_t col) {
    const std::string pos =
        row < l.live ? fmt::format("position {}", l.seq_len(row) - 1) : std::string("padding");
    return fmt::format("sequence {} (decode row {}, {}), head {}, dim {}", row, row, pos,
                       col / l.g.hd, col % l.g.hd);
  };
}

Where partial_where(const AttnLayout& l) {
  return [l](uint64_t row, uint64_t col) {
    const uint64_t k = row % l.S, q = (row / l.S) % l.g.nq, r = row / (l.S * l.g.nq);
    const std::string what = col < l.g.hd    ? fmt::format("dim {}", col)
                             : col == l.g.hd ? std::string("m")
                                             : std::string("l");
    return fmt::format("sequence {} (decode row {}), head {}, split {}, {}", r, r, q, k, what);
  };
}

// [num_blocks·block_size·nkv, hd] rows of a cache.
Where cache_where(const AttnLayout& l, const char* which) {
  return [l, which](uint64_t row, uint64_t col) {
    const uint64_t slot = row / l.g.nkv;
    return fmt::format("{} cache slot {} (block {}, offset {}), kv head {}, dim {}", which, slot,
                       slot / l.bs, slot % l.bs, row % l.g.nkv, col);
  };
}

// --- comparison helpers -------------------------------------------------------------------------

void fail_at(TensorComparison& c, uint64_t row, uint64_t col, double got, uint64_t bits,
             std::string reason) {
  ++c.failures;
  if (!c.first_bad) c.first_bad = Mismatch{row, col, got, 0.0, bits, std::move(reason)};
}

// Bit-for-bit equality of BF16 arrays (the cache holds NaN poison that must stay as it is, so
// the value comparisons, which fail every poison pattern, do not apply).
TensorComparison same_bits(std::string name, std::span<const uint16_t> got,
                           std::span<const uint16_t> want, uint64_t cols, const Where& where,
                           std::string formula) {
  if (got.size() != want.size())
    throw Error(fmt::format("judge_attention: {}: {} elements, expected {}", name, got.size(),
                            want.size()));
  TensorComparison c = property(std::move(name), got.size() / cols, cols, std::move(formula));
  c.dtype = "bf16";
  for (uint64_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      fail_at(c, i / cols, i % cols, bf16_value(got[i]), got[i],
              fmt::format("bits {:#06x}, expected {:#06x}", got[i], want[i]));
  return located(std::move(c), where);
}

std::vector<uint8_t> mask_where(const std::vector<double>& bound, bool copies) {
  std::vector<uint8_t> m(bound.size());
  for (size_t i = 0; i < m.size(); ++i) m[i] = (bound[i] == 0.0) == copies;
  return m;
}

bool any_of(const std::vector<uint8_t>& m) {
  return std::any_of(m.begin(), m.end(), [](uint8_t v) { return v != 0; });
}

// One element within a bound, by the rules of compare.h (NaN meets NaN, ±Inf the same ±Inf).
bool within(double got, double want, double bound) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::isfinite(got) && std::fabs(got - want) <= bound;
}

// The diagnosis of a core check: group g (`group` consecutive elements: one row and head, or one
// split-K slot) fails it when it breaks the spec reference's bound and lies within the
// alternative's everywhere.
TensorComparison diagnose(std::string name, const std::vector<double>& got, const AttnValues& spec,
                          const AttnValues& alt, uint64_t group, uint64_t cols, const Where& where,
                          const std::string& bug) {
  TensorComparison c =
      property(std::move(name), got.size() / cols, cols,
               "fails where the core check fails AND the output agrees with " + bug);
  for (uint64_t g0 = 0; g0 + group <= got.size(); g0 += group) {
    bool spec_ok = true, alt_ok = true;
    uint64_t bad = g0;
    for (uint64_t i = g0; i < g0 + group; ++i) {
      if (!within(got[i], spec.value[i], spec.bound[i]) && spec_ok) {
        spec_ok = false;
        bad = i;
      }
      alt_ok = alt_ok && within(got[i], alt.value[i], alt.bound[i]);
    }
    if (spec_ok || !alt_ok) continue;
    fail_at(c, bad / cols, bad % cols, got[bad], 0,
            fmt::format("{} vs the spec's {} (bound {:.3g}): the output matches {}", got[bad],
                        spec.value[bad], spec.bound[bad], bug));
  }
  return located(std::move(c), where);
}

// BF16 references: the values rounded where the backend stores, the bounds as given.
AttnValues stored_bf16_values(AttnValues v) {
  for (double& x : v.value) x = round_bf16(x);
  return v;
}

std::vector<double> widen_bits(std::span<const uint16_t> v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_value(v[i]);
  return out;
}

std::vector<double> widen_f32(std::span<const float> v) { return {v.begin(), v.end()}; }

void require(const char* what, uint64_t got, uint64_t want) {
  if (got != want)
    throw Error(fmt::format("judge_attention: run {} holds {} elements, the pass needs {}", what,
                            got, want));
}

// --- staging ------------------------------------------------------------------------------------

// A staged part (Q or K): bounded where the stage computes, exact where it copies.
void judge_staged(const AttnLayout& l, bool k_part, std::span<const uint16_t> got,
                  const BoundModel& bm, AgreementReport& r) {
  const AttnStageInput in = stage_input(l, false, k_part);
  const AttnValues v = stored_bf16_values(attn_stage_fp64(l.g, in, Mode::faithful, &bm));
  const uint64_t width = in.heads * l.g.hd;
  require(k_part ? "k_scratch" : "q_copy", got.size(), l.t * width);
  const std::string part = k_part ? "k" : "q";
  const std::vector<uint8_t> computed = mask_where(v.bound, false),
                             copies = mask_where(v.bound, true);
  if (any_of(computed))
    r.checks.push_back(
        located(compare_bf16_bounded(part + " (stage)", got, v.value, width,
                                     {v.bound, computed, attn_stage_bounds_formula()}),
                prefill_where(l)));
  if (any_of(copies))
    r.checks.push_back(located(
        compare_bf16_bounded(part + " (pass-through)", got, v.value, width,
                             {v.bound, copies, "bit-exact: dims >= rotary_dim without qk_norm"}),
        prefill_where(l)));
  // Faithful vs exact (the FP32 angle), reported.
  const AttnValues ex = attn_stage_fp64(l.g, in, Mode::exact);
  r.reported.push_back(compare_f64(part + " (stage) faithful vs exact",
                                   attn_stage_fp64(l.g, in, Mode::faithful).value, ex.value, width,
                                   Tolerance{}, /*asserted=*/false));
}

void judge_staging(const AttnLayout& l, const AttnRun& run, const BoundModel& bm,
                   AgreementReport& r) {
  if (l.t == 0) return;
  judge_staged(l, false, run.q_copy, bm, r);
  judge_staged(l, true, run.k_scratch, bm, r);
  const uint64_t kvw = l.g.kv_width();
  require("v_scratch", run.v_scratch.size(), l.t * kvw);
  std::vector<uint16_t> v_in(l.t * kvw);
  for (uint64_t i = 0; i < l.t; ++i)
    std::copy_n(l.c.qkv.begin() + static_cast<std::ptrdiff_t>((l.R + i) * l.g.qkv_dim + l.g.v_col0),
                kvw, v_in.begin() + static_cast<std::ptrdiff_t>(i * kvw));
  r.checks.push_back(same_bits("v (copy)", run.v_scratch, v_in, kvw, prefill_where(l),
                               "bit-exact: V copied unchanged"));
  const uint64_t pad = (l.c.prefill.kv_rows() - l.t) * kvw;
  if (pad > 0) {
    require("k_pad", run.k_pad.size(), pad);
    require("v_pad", run.v_pad.size(), pad);
    std::vector<uint16_t> both(run.k_pad);
    both.insert(both.end(), run.v_pad.begin(), run.v_pad.end());
    r.checks.push_back(same_bits(
        "pad rows (K/V scratch)", both, std::vector<uint16_t>(2 * pad, 0), kvw,
        [l](uint64_t row, uint64_t col) {
          const uint64_t n = l.c.prefill.kv_rows() - l.t;
          return fmt::format("{} phantom row {}, kv head {}, dim {}", row < n ? "K" : "V",
                             l.t + row % n, col / l.g.hd, col % l.g.hd);
        },
        "zeros (phantom rows, ops/attention.h)"));
  }
}

// --- cache writes -------------------------------------------------------------------------------

void judge_cache(const AttnLayout& l, const AttnRun& run, const BoundModel& bm,
                 AgreementReport& r) {
  const uint64_t kvw = l.g.kv_width(), hd = l.g.hd, n = l.slots * kvw;
  std::vector<uint16_t> k_base = l.c.k_cache, v_base = l.c.v_cache;
  if (l.R > 0) {
    require("k_cache_decode_write", run.k_cache_decode_write.size(), n);
    require("v_cache_decode_write", run.v_cache_decode_write.size(), n);
    const AttnValues kv =
        stored_bf16_values(attn_stage_fp64(l.g, stage_input(l, true, true), Mode::faithful, &bm));
    std::vector<double> want(n, 0.0), bound(n, 0.0);
    std::vector<uint8_t> written(n, 0);
    std::vector<uint16_t> copies_want = k_base, copies_got = run.k_cache_decode_write;
    std::vector<uint16_t> v_want = v_base;
    for (uint64_t row = 0; row < l.R; ++row) {
      const int64_t s = l.c.decode.slots.at(row);
      if (s < 0 || static_cast<uint64_t>(s) >= l.slots) continue;
      const uint64_t at = static_cast<uint64_t>(s) * kvw;
      for (uint64_t i = 0; i < kvw; ++i) {
        want[at + i] = kv.value[row * kvw + i];
        bound[at + i] = kv.bound[row * kvw + i];
        written[at + i] = 1;
        // The K slot is judged by the bound; here it only has to match itself.
        copies_want[at + i] = run.k_cache_decode_write[at + i];
        v_want[at + i] = l.c.qkv[row * l.g.qkv_dim + l.g.v_col0 + i];
      }
    }
    r.checks.push_back(
        located(compare_bf16_bounded("cache write (decode K)", run.k_cache_decode_write, want, hd,
                                     {bound, written, attn_stage_bounds_formula()}),
                [l](uint64_t row, uint64_t col) {
                  const uint64_t slot = row / l.g.nkv;
                  for (uint64_t d = 0; d < l.R; ++d)
                    if (l.c.decode.slots[d] == static_cast<int64_t>(slot))
                      return fmt::format(
                          "sequence {} (decode row {}, position {}), slot {}, kv head {}, "
                          "dim {}",
                          d, d, l.seq_len(d) - 1, slot, row % l.g.nkv, col);
                  return fmt::format("slot {}, kv head {}, dim {}", slot, row % l.g.nkv, col);
                }));
    copies_got.insert(copies_got.end(), run.v_cache_decode_write.begin(),
                      run.v_cache_decode_write.end());
    copies_want.insert(copies_want.end(), v_want.begin(), v_want.end());
    const Where kw = cache_where(l, "K"), vw = cache_where(l, "V");
    const uint64_t krows = n / hd;
    r.checks.push_back(same_bits(
        "cache write (decode, copies)", copies_got, copies_want, hd,
        [kw, vw, krows](uint64_t row, uint64_t col) {
          return row < krows ? kw(row, col) : vw(row - krows, col);
        },
        "bit-exact: V of the decode rows at their slots, every other slot unchanged"));
    k_base = run.k_cache_decode_write;
    v_base = run.v_cache_decode_write;
  }
  if (l.t > 0) {
    require("k_cache", run.k_cache.size(), n);
    require("v_cache", run.v_cache.size(), n);
    std::vector<uint16_t> want = k_base, vwant = v_base;
    for (uint64_t i = 0; i < l.t; ++i) {
      const int64_t s = l.c.prefill.slots.at(i);
      if (s < 0 || static_cast<uint64_t>(s) >= l.slots) continue;
      std::copy_n(run.k_scratch.begin() + static_cast<std::ptrdiff_t>(i * kvw), kvw,
                  want.begin() + s * static_cast<int64_t>(kvw));
      std::copy_n(run.v_scratch.begin() + static_cast<std::ptrdiff_t>(i * kvw), kvw,
                  vwant.begin() + s * static_cast<int64_t>(kvw));
    }
    std::vector<uint16_t> got = run.k_cache;
    got.insert(got.end(), run.v_cache.begin(), run.v_cache.end());
    want.insert(want.end(), vwant.begin(), vwant.end());
    const Where kw = cache_where(l, "K"), vw = cache_where(l, "V");
    const uint64_t krows = n / hd;
    r.checks.push_back(same_bits(
        "cache write (prefill)", got, want, hd,
        [kw, vw, krows](uint64_t row, uint64_t col) {
          return row < krows ? kw(row, col) : vw(row - krows, col);
        },
        "bit-exact: the K/V scratch rows at their slots, every other slot unchanged"));
  }
  if (!run.k_cache_end.empty()) {
    const std::vector<uint16_t>& kc = run.k_cache.empty() ? run.k_cache_decode_write : run.k_cache;
    const std::vector<uint16_t>& vc = run.v_cache.empty() ? run.v_cache_decode_write : run.v_cache;
    std::vector<uint16_t> got = run.k_cache_end, want = kc;
    got.insert(got.end(), run.v_cache_end.begin(), run.v_cache_end.end());
    want.insert(want.end(), vc.begin(), vc.end());
    r.checks.push_back(same_bits("cache intact (cores)", got, want, hd, cache_where(l, "K/V"),
                                 "bit-exact: the cores write no cache"));
  }
}

// --- cores --------------------------------------------------------------------------------------

// The keys of each sequence, gathered in logical order from what the backend stored, plus the
// one past the row range a leaking row would read (when the layout holds it).
struct SeqKeys {
  std::vector<std::vector<uint16_t>> k, v;
  std::vector<AttnKeys> keys;

  void finish() {
    keys.clear();
    for (size_t b = 0; b < k.size(); ++b)
      keys.push_back(AttnKeys{k[b], v[b], k[b].size() / kv_width});
  }
  uint64_t kv_width = 0;
};

void push_row(std::vector<uint16_t>& to, std::span<const uint16_t> from, uint64_t row,
              uint64_t width) {
  to.insert(to.end(), from.begin() + static_cast<std::ptrdiff_t>(row * width),
            from.begin() + static_cast<std::ptrdiff_t>((row + 1) * width));
}

SeqKeys prefill_keys(const AttnLayout& l, const AttnRun& run) {
  const uint64_t kvw = l.g.kv_width(), streams = l.c.prefill.streams;
  SeqKeys sk;
  sk.kv_width = kvw;
  sk.k.resize(streams);
  sk.v.resize(streams);
  for (uint64_t b = 0; b < streams; ++b) {
    for (uint64_t j = 0; j < l.ctx(b); ++j) {
      const int64_t s = l.slot_of(l.c.prefill.block_table, streams, b, j);
      if (s < 0)
        throw Error(
            fmt::format("judge_attention: prefill stream {} key {} has no cache block", b, j));
      push_row(sk.k[b], run.k_cache, static_cast<uint64_t>(s), kvw);
      push_row(sk.v[b], run.v_cache, static_cast<uint64_t>(s), kvw);
    }
    // Keys ctx_b + i from the scratch, and the row after the stream's last (the next stream's
    // first) where the scratch has it.
    for (uint64_t i = 0; i < l.L + 1 && b * l.L + i < l.t; ++i) {
      push_row(sk.k[b], run.k_scratch, b * l.L + i, kvw);
      push_row(sk.v[b], run.v_scratch, b * l.L + i, kvw);
    }
  }
  sk.finish();
  return sk;
}

SeqKeys decode_keys(const AttnLayout& l, const AttnRun& run) {
  const uint64_t kvw = l.g.kv_width();
  SeqKeys sk;
  sk.kv_width = kvw;
  sk.k.resize(l.live);
  sk.v.resize(l.live);
  for (uint64_t r = 0; r < l.live; ++r)
    for (uint64_t j = 0; j <= l.seq_len(r); ++j) {  // j = seq_len: the key past the last
      const int64_t s = l.slot_of(l.c.decode.block_table, l.R, r, j);
      if (s < 0) {
        if (j < l.seq_len(r))
          throw Error(
              fmt::format("judge_attention: decode row {} key {} has no cache block", r, j));
        break;
      }
      push_row(sk.k[r], run.k_cache, static_cast<uint64_t>(s), kvw);
      push_row(sk.v[r], run.v_cache, static_cast<uint64_t>(s), kvw);
    }
  sk.finish();
  return sk;
}

struct CoreRows {
  std::vector<double> q, q_err;
  std::vector<uint64_t> pos, seq;
};

// The checks of one core output (one split): the two diagnoses, then the bounded comparison.
// A core check and, before it, its two diagnoses: `alt` computes the reference of a variant (the
// judge pays for the alternatives only when the core check fails; else they are reported as
// checks with nothing to diagnose).
void push_diagnosed(AgreementReport& r, TensorComparison main, const std::string& causal,
                    const std::string& gqa, const std::vector<double>& got, const AttnValues& spec,
                    const std::function<AttnValues(AttnVariant)>& alt, uint64_t group,
                    uint64_t cols, const Where& where) {
  const std::string why_c = "the reference that also attends to position p + 1";
  const std::string why_g = "the reference reading KV head q % nkv";
  if (main.passed()) {
    r.checks.push_back(property(causal, main.rows, cols, "the core check passed: " + why_c));
    r.checks.push_back(property(gqa, main.rows, cols, "the core check passed: " + why_g));
  } else {
    r.checks.push_back(
        diagnose(causal, got, spec, alt(AttnVariant::causal_leak), group, cols, where, why_c));
    r.checks.push_back(
        diagnose(gqa, got, spec, alt(AttnVariant::gqa_modulo), group, cols, where, why_g));
  }
  r.checks.push_back(std::move(main));
}

// The checks of one core output (one split).
void judge_core_output(const std::string& core, const AttnGeometry& g, AttnCoreInput in,
                       std::span<const uint16_t> got, const Where& where, const BoundModel& bm,
                       AgreementReport& r) {
  const AttnValues spec = stored_bf16_values(attn_core_fp64(g, in, &bm));
  TensorComparison main =
      located(compare_bf16_bounded("attn (" + core + ")", got, spec.value, g.q_width(),
                                   {spec.bound, {}, attn_core_bounds_formula()}),
              where);
  push_diagnosed(
      r, std::move(main), "attn (" + core + ", causal)", "attn (" + core + ", GQA map)",
      widen_bits(got), spec,
      [&](AttnVariant v) {
        AttnCoreInput alt = in;
        alt.variant = v;
        return stored_bf16_values(attn_core_fp64(g, alt, &bm));
      },
      g.hd, g.q_width(), where);
}

void judge_prefill_core(const AttnLayout& l, const AttnRun& run, const BoundModel& bm,
                        AgreementReport& r) {
  require("prefill_out", run.prefill_out.size(), l.t * l.g.q_width());
  const SeqKeys sk = prefill_keys(l, run);
  CoreRows rows;
  rows.q = widen_bits(run.q_copy);
  for (uint64_t i = 0; i < l.t; ++i) {
    rows.pos.push_back(l.ctx(i / l.L) + i % l.L);
    rows.seq.push_back(i / l.L);
  }
  AttnCoreInput in{rows.q, {}, rows.pos, rows.seq, sk.keys, l.c.sinks, l.window, AttnVariant::spec};
  judge_core_output("prefill core", l.g, in, run.prefill_out, prefill_where(l), bm, r);
}

// The decode rows' queries: the oracle's own staging (the decode core fuses it and stores no
// query), with the uncertainty of the backend's stored BF16 query (attn_stage_stored: 0 unless a
// BF16 rounding boundary lies within the stage's bound).
CoreRows decode_rows(const AttnLayout& l, const BoundModel& bm) {
  const AttnValues qs = attn_stage_stored(l.g, stage_input(l, true, false), bm);
  CoreRows rows;
  const uint64_t qw = l.g.q_width();
  rows.q.assign(qs.value.begin(), qs.value.begin() + static_cast<std::ptrdiff_t>(l.live * qw));
  rows.q_err.assign(qs.bound.begin(), qs.bound.begin() + static_cast<std::ptrdiff_t>(l.live * qw));
  for (uint64_t row = 0; row < l.live; ++row) {
    if (l.seq_len(row) == 0)
      throw Error(fmt::format("judge_attention: live decode row {} has seq_len 0", row));
    rows.pos.push_back(l.seq_len(row) - 1);
    rows.seq.push_back(row);
  }
  return rows;
}

void judge_pad_decode(const AttnLayout& l, const AttnRun& run, AgreementReport& r) {
  const uint64_t qw = l.g.q_width();
  if (l.R == l.live) return;
  const std::span<const uint16_t> pad =
      std::span<const uint16_t>(run.decode_out).subspan(l.live * qw);
  r.checks.push_back(same_bits(
      "pad rows (decode)", pad, std::vector<uint16_t>(pad.size(), 0), qw,
      [l](uint64_t row, uint64_t col) { return decode_where(l)(row + l.live, col); },
      "zeros: padding rows read nothing and write zeros"));
}

void judge_decode_core(const AttnLayout& l, const AttnRun& run, const BoundModel& bm,
                       AgreementReport& r) {
  const uint64_t qw = l.g.q_width(), hd = l.g.hd, slot = hd + 2;
  require("decode_out", run.decode_out.size(), l.R * qw);
  const SeqKeys sk = decode_keys(l, run);
  const CoreRows rows = decode_rows(l, bm);
  AttnCoreInput in{rows.q,  rows.q_err, rows.pos, rows.seq,
                   sk.keys, l.c.sinks,  l.window, AttnVariant::spec};
  const std::span<const uint16_t> live_out =
      std::span<const uint16_t>(run.decode_out).subspan(0, l.live * qw);
  if (!l.split_k()) {
    judge_core_output("decode core", l.g, in, live_out, decode_where(l), bm, r);
    judge_pad_decode(l, run, r);
    return;
  }
  const uint64_t per_row = l.g.nq * l.S * slot;
  require("partials", run.partials.size(), l.R * per_row);
  const std::span<const float> stored =
      std::span<const float>(run.partials).subspan(0, l.live * per_row);
  in.sinks = {};  // left to the merge
  const AttnValues spec = attn_partials_fp64(l.g, in, l.S, l.bs, stored, &bm);
  const Where pw = partial_where(l);
  TensorComparison main =
      located(compare_f32_bounded("partials (split-K)", stored, spec.value, slot,
                                  {spec.bound, {}, attn_partials_bounds_formula()}),
              pw);
  push_diagnosed(
      r, std::move(main), "partials (split-K, causal)", "partials (split-K, GQA map)",
      widen_f32(stored), spec,
      [&](AttnVariant v) {
        AttnCoreInput alt = in;
        alt.variant = v;
        return attn_partials_fp64(l.g, alt, l.S, l.bs, stored, &bm);
      },
      slot, slot, pw);
  if (l.R > l.live) {
    const std::span<const float> pad =
        std::span<const float>(run.partials).subspan(l.live * per_row);
    TensorComparison c = property("pad rows (split-K partials)", pad.size() / slot, slot,
                                  "exact: o = 0, m = -inf, l = 0 (ops/attention.h)");
    for (uint64_t i = 0; i < pad.size(); ++i) {
      const uint64_t col = i % slot;
      const float want = col == hd ? -std::numeric_limits<float>::infinity() : 0.0f;
      if (std::bit_cast<uint32_t>(pad[i]) != std::bit_cast<uint32_t>(want) &&
          !(pad[i] == want && col != hd))
        fail_at(c, i / slot, col, pad[i], std::bit_cast<uint32_t>(pad[i]),
                fmt::format("{}, expected {}", pad[i], want));
    }
    r.checks.push_back(located(std::move(c), [l, pw](uint64_t row, uint64_t col) {
      return pw(row + l.live * l.g.nq * l.S, col);
    }));
  }
  // The merge from the stored partials.
  const AttnValues m =
      stored_bf16_values(attn_merge_fp64(l.live, l.g.nq, hd, l.S, stored, l.c.sinks, &bm));
  r.checks.push_back(located(compare_bf16_bounded("merge", live_out, m.value, qw,
                                                  {m.bound, {}, attn_merge_bounds_formula()}),
                             decode_where(l)));
  judge_pad_decode(l, run, r);
}

void judge_cores(const AttnLayout& l, const AttnRun& run, const BoundModel& bm,
                 AgreementReport& r) {
  if (l.R > 0) judge_decode_core(l, run, bm, r);
  if (l.t > 0) judge_prefill_core(l, run, bm, r);
}

// --- gate
// -----------------------------------------------------------------------------------------

void judge_gate(const AttnLayout& l, const AttnRun& run, const BoundModel& bm, AgreementReport& r) {
  const uint64_t rows = l.R + l.t, qw = l.g.q_width();
  require("attn", run.attn.size(), rows * qw);
  std::vector<uint16_t> cores(run.decode_out);
  cores.insert(cores.end(), run.prefill_out.begin(), run.prefill_out.end());
  if (cores.size() == run.attn.size())
    r.checks.push_back(same_bits(
        "attn_output rows", run.attn, cores, qw,
        [l](uint64_t row, uint64_t col) {
          return row < l.R ? decode_where(l)(row, col) : prefill_where(l)(row - l.R, col);
        },
        "bit-exact: attn_output holds the cores' outputs"));
  if (!l.g.gated) return;
  require("gated", run.gated.size(), rows * qw);
  const AttnValues v = stored_bf16_values(attn_gate_fp64(l.g, rows, run.attn, l.c.qkv, &bm));
  r.checks.push_back(located(compare_bf16_bounded("gate", run.gated, v.value, qw,
                                                  {v.bound, {}, attn_gate_bounds_formula()}),
                             [l](uint64_t row, uint64_t col) {
                               return row < l.R ? decode_where(l)(row, col)
                                                : prefill_where(l)(row - l.R, col);
                             }));
}

std::string params_of(const AttnCase& c) {
  return fmt::format("attention({},R={},live={},S={},streams={},L={},bs={},{})", c.geom.to_string(),
                     c.decode.rows, c.decode.live, c.decode.splits, c.prefill.streams, c.prefill.L,
                     c.cache.block_size, c.sliding ? "sliding" : "full");
}

}  // namespace
}  // namespace attn_judge

void judge_attention_stage(AttnStageGroup stage, const AttnCase& c, const AttnRun& run,
                           const BoundModel& bm, AgreementReport& r) {
  using namespace attn_judge;
  const AttnLayout l(c);
  switch (stage) {
    case AttnStageGroup::staging:
      return judge_staging(l, run, bm, r);
    case AttnStageGroup::cache:
      return judge_cache(l, run, bm, r);
    case AttnStageGroup::core:
      return judge_cores(l, run, bm, r);
    case AttnStageGroup::gate:
      return judge_gate(l, run, bm, r);
  }
}

AgreementReport judge_attention(const AttnCase& c, const AttnRun& run, const std::string& backend,
                                uint64_t seed, const BoundModel& bm) {
  using namespace attn_judge;
  AgreementReport r{"attention", params_of(c), backend, seed, {}, {}};
  for (AttnStageGroup s :
       {AttnStageGroup::staging, AttnStageGroup::cache, AttnStageGroup::core, AttnStageGroup::gate})
    judge_attention_stage(s, c, run, bm, r);
  return r;
}

// --- the perfect run
// ------------------------------------------------------------------------------

AttnRun perfect_attn_run(const AttnCase& c) {
  using namespace attn_judge;
  const AttnLayout l(c);
  const uint64_t kvw = l.g.kv_width(), qw = l.g.q_width(), hd = l.g.hd, slot = hd + 2;
  AttnRun run;
  std::vector<uint16_t> kc = c.k_cache, vc = c.v_cache;
  if (l.R > 0) {
    const AttnValues k = attn_stage_fp64(l.g, stage_input(l, true, true), Mode::faithful);
    const std::vector<uint16_t> kb = to_bf16_bits(k.value);
    for (uint64_t row = 0; row < l.R; ++row) {
      const int64_t s = c.decode.slots.at(row);
      if (s < 0 || static_cast<uint64_t>(s) >= l.slots) continue;
      for (uint64_t i = 0; i < kvw; ++i) {
        kc[static_cast<uint64_t>(s) * kvw + i] = kb[row * kvw + i];
        vc[static_cast<uint64_t>(s) * kvw + i] = c.qkv[row * l.g.qkv_dim + l.g.v_col0 + i];
      }
    }
    run.k_cache_decode_write = kc;
    run.v_cache_decode_write = vc;
  }
  if (l.t > 0) {
    run.q_copy =
        to_bf16_bits(attn_stage_fp64(l.g, stage_input(l, false, false), Mode::faithful).value);
    run.k_scratch =
        to_bf16_bits(attn_stage_fp64(l.g, stage_input(l, false, true), Mode::faithful).value);
    run.v_scratch.resize(l.t * kvw);
    for (uint64_t i = 0; i < l.t; ++i)
      std::copy_n(c.qkv.begin() + static_cast<std::ptrdiff_t>((l.R + i) * l.g.qkv_dim + l.g.v_col0),
                  kvw, run.v_scratch.begin() + static_cast<std::ptrdiff_t>(i * kvw));
    const uint64_t pad = (c.prefill.kv_rows() - l.t) * kvw;
    run.k_pad.assign(pad, 0);
    run.v_pad.assign(pad, 0);
    for (uint64_t i = 0; i < l.t; ++i) {
      const int64_t s = c.prefill.slots.at(i);
      if (s < 0 || static_cast<uint64_t>(s) >= l.slots) continue;
      std::copy_n(run.k_scratch.begin() + static_cast<std::ptrdiff_t>(i * kvw), kvw,
                  kc.begin() + s * static_cast<int64_t>(kvw));
      std::copy_n(run.v_scratch.begin() + static_cast<std::ptrdiff_t>(i * kvw), kvw,
                  vc.begin() + s * static_cast<int64_t>(kvw));
    }
  }
  run.k_cache = kc;
  run.v_cache = vc;
  const BoundModel bm = cpu_bounds();
  if (l.R > 0) {
    const SeqKeys sk = decode_keys(l, run);
    CoreRows rows = decode_rows(l, bm);
    rows.q_err.clear();
    AttnCoreInput in{rows.q, {}, rows.pos, rows.seq, sk.keys, c.sinks, l.window, AttnVariant::spec};
    run.decode_out.assign(l.R * qw, 0);
    if (!l.split_k()) {
      const std::vector<uint16_t> o = to_bf16_bits(attn_core_fp64(l.g, in).value);
      std::copy(o.begin(), o.end(), run.decode_out.begin());
    } else {
      in.sinks = {};
      std::vector<float> parts = to_f32(attn_partials_fp64(l.g, in, l.S, l.bs).value);
      for (uint64_t i = 0; i < (l.R - l.live) * l.g.nq * l.S; ++i) {
        std::vector<float> empty(slot, 0.0f);
        empty[hd] = -std::numeric_limits<float>::infinity();
        parts.insert(parts.end(), empty.begin(), empty.end());
      }
      run.partials = parts;
      const std::vector<uint16_t> o =
          to_bf16_bits(attn_merge_fp64(l.live, l.g.nq, hd, l.S, parts, c.sinks).value);
      std::copy(o.begin(), o.end(), run.decode_out.begin());
    }
  }
  if (l.t > 0) {
    const SeqKeys sk = prefill_keys(l, run);
    CoreRows rows;
    rows.q = widen_bits(run.q_copy);
    for (uint64_t i = 0; i < l.t; ++i) {
      rows.pos.push_back(l.ctx(i / l.L) + i % l.L);
      rows.seq.push_back(i / l.L);
    }
    AttnCoreInput in{rows.q, {}, rows.pos, rows.seq, sk.keys, c.sinks, l.window, AttnVariant::spec};
    run.prefill_out = to_bf16_bits(attn_core_fp64(l.g, in).value);
  }
  run.attn = run.decode_out;
  run.attn.insert(run.attn.end(), run.prefill_out.begin(), run.prefill_out.end());
  if (l.g.gated) run.gated = to_bf16_bits(attn_gate_fp64(l.g, l.R + l.t, run.attn, c.qkv).value);
  run.k_cache_end = run.k_cache;
  run.v_cache_end = run.v_cache;
  return run;
}

}  // namespace bufferlab::oracle
