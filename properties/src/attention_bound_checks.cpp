// The bound-based attention properties (attention_bound_checks.h); the derivations are in the
// header.
#include "bufferlab/properties/attention_bound_checks.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "bufferlab/core/error.h"
#include "bufferlab/oracle/attention.h"
#include "bufferlab/oracle/bounds.h"

namespace bufferlab::gen {
namespace {

using oracle::AttnCase;
using oracle::AttnRun;
using U = uint64_t;

constexpr double kFp64Slack = 0x1p-40;  // see the header: FP64 evaluation of the references
constexpr uint16_t kBf16One = 0x3F80;

double bf16_value(uint16_t b) {
  return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(b) << 16));
}

// max_i |got_i − rb(ref_i)| / bound_i.
AttnBoundResult worst_ratio(const std::vector<double>& got, const std::vector<double>& ref,
                            const std::vector<double>& bound, U cols) {
  AttnBoundResult r;
  r.applicable = true;
  for (U i = 0; i < got.size(); ++i) {
    const double d = std::fabs(got[i] - oracle::round_bf16(ref[i]));
    ++r.elements;
    r.bound_ulps += bound[i] / oracle::bf16_ulp_at(ref[i]);
    if (d == 0.0) continue;
    ++r.differing;
    const double q = bound[i] > 0.0 ? d / bound[i] : std::numeric_limits<double>::infinity();
    if (!(q <= r.worst)) {
      r.worst = q;
      char buf[200];
      std::snprintf(buf, sizeof buf, "[row %llu, col %llu]: got %.9g, ref %.9g, bound %.3g",
                    static_cast<unsigned long long>(i / cols),
                    static_cast<unsigned long long>(i % cols), got[i], ref[i], bound[i]);
      r.where = buf;
    }
  }
  return r;
}

// The decode rows' core inputs the way the judge builds them: the oracle's staged queries (the
// decode core stores none; q_err the uncertainty of the backend's BF16 query) and each live
// row's keys in logical order read from the cache the cores saw.
struct DecodeRows {
  std::vector<double> q, q_err;
  std::vector<U> pos, seq;
  std::vector<std::vector<uint16_t>> k, v;  // per live row: [n, nkv·hd]
  std::vector<U> n;
  std::vector<oracle::AttnKeys> keys;

  oracle::AttnCoreInput input(const AttnCase& c, U window) {
    keys.clear();
    for (U r = 0; r < k.size(); ++r) keys.push_back({k[r], v[r], n[r], {}});
    return {q, q_err, pos, seq, keys, c.sinks, window, oracle::AttnVariant::spec};
  }
};

DecodeRows decode_rows(const AttnCase& c, const AttnRun& run, const oracle::BoundModel& bm) {
  const AttnGeometry& g = c.geom;
  const U R = c.decode.rows, live = c.decode.live, qw = g.q_width(), kw = g.kv_width();
  const U bs = c.cache.block_size, max_blocks = c.decode.block_table.size() / R;
  oracle::AttnStageInput si;
  si.src = c.qkv;
  si.stride = g.qkv_dim;
  si.col0 = 0;
  si.rows = R;
  si.heads = g.nq;
  si.positions = c.decode.positions;
  si.pos_stride = R;
  si.rope = c.rope;
  si.norm = c.q_norm;
  const oracle::AttnValues qs = oracle::attn_stage_stored(g, si, bm);
  DecodeRows d;
  d.q.assign(qs.value.begin(), qs.value.begin() + static_cast<std::ptrdiff_t>(live * qw));
  d.q_err.assign(qs.bound.begin(), qs.bound.begin() + static_cast<std::ptrdiff_t>(live * qw));
  const std::vector<uint16_t>& kc = run.k_cache.empty() ? run.k_cache_decode_write : run.k_cache;
  const std::vector<uint16_t>& vc = run.v_cache.empty() ? run.v_cache_decode_write : run.v_cache;
  for (U r = 0; r < live; ++r) {
    const U len = static_cast<U>(c.decode.seq_lens[r]);
    d.pos.push_back(len - 1);
    d.seq.push_back(r);
    d.n.push_back(len);
    d.k.emplace_back();
    d.v.emplace_back();
    for (U j = 0; j < len; ++j) {
      const U slot = static_cast<U>(c.decode.block_table[r * max_blocks + j / bs]) * bs + j % bs;
      d.k[r].insert(d.k[r].end(), kc.begin() + static_cast<std::ptrdiff_t>(slot * kw),
                    kc.begin() + static_cast<std::ptrdiff_t>((slot + 1) * kw));
      d.v[r].insert(d.v[r].end(), vc.begin() + static_cast<std::ptrdiff_t>(slot * kw),
                    vc.begin() + static_cast<std::ptrdiff_t>((slot + 1) * kw));
    }
  }
  return d;
}

std::vector<double> live_out(const AttnCase& c, const AttnRun& run) {
  std::vector<double> o;
  for (U i = 0; i < c.decode.live * c.geom.q_width(); ++i)
    o.push_back(bf16_value(run.decode_out[i]));
  return o;
}

}  // namespace

AttnBoundResult attn_split_vs_one_split(Backend& b, const AttnCase& cS, bool plant,
                                        const oracle::BoundModel& bm) {
  if (cS.decode.live == 0 || cS.decode.splits < 2)
    throw Error("attn_split_vs_one_split: needs live decode rows and splits >= 2");
  AttnCase c1 = cS;
  c1.decode.splits = 1;
  const AttnGeometry& geo = cS.geom;
  const U live = cS.decode.live, nq = geo.nq, hd = geo.hd, S = cS.decode.splits, slot = hd + 2;
  const U window = cS.sliding ? geo.window : 0;
  const AttnRun rS = oracle::run_attention(b, cS), r1 = oracle::run_attention(b, c1);
  DecodeRows d1 = decode_rows(c1, r1, bm), dS = decode_rows(cS, rS, bm);
  const oracle::AttnValues core = oracle::attn_core_fp64(geo, d1.input(c1, window), &bm);
  const std::vector<float> parts(
      rS.partials.begin(), rS.partials.begin() + static_cast<std::ptrdiff_t>(live * nq * S * slot));
  const oracle::AttnValues P =
      oracle::attn_partials_fp64(geo, dS.input(cS, window), S, cS.cache.block_size, parts, &bm);
  const oracle::AttnValues merge = oracle::attn_merge_fp64(live, nq, hd, S, parts, cS.sinks, &bm);

  std::vector<double> bound(core.value.size());
  for (U r = 0; r < live; ++r)
    for (U h = 0; h < nq; ++h) {
      const U base = (r * nq + h) * S * slot;
      double M = cS.sinks.empty() ? -std::numeric_limits<double>::infinity()
                                  : static_cast<double>(cS.sinks[h]);
      for (U k = 0; k < S; ++k)
        if (parts[base + k * slot + hd + 1] > 0.0f)
          M = std::max(M, static_cast<double>(parts[base + k * slot + hd]));
      double D = cS.sinks.empty() ? 0.0 : std::exp(static_cast<double>(cS.sinks[h]) - M);
      double dD = 0.0;
      std::vector<double> w(S, 0.0), dw(S, 0.0);
      for (U k = 0; k < S; ++k) {
        const U at = base + k * slot;
        if (!(parts[at + hd + 1] > 0.0f)) continue;
        const double a = std::exp(static_cast<double>(parts[at + hd]) - M);
        w[k] = static_cast<double>(parts[at + hd + 1]) * a;
        dw[k] = P.bound[at + hd + 1] * a;
        D += w[k];
        dD += dw[k];
      }
      for (U d = 0; d < hd; ++d) {
        double dN = 0.0;
        for (U k = 0; k < S; ++k) {
          const U at = base + k * slot + d;
          if (w[k] == 0.0 && dw[k] == 0.0) continue;
          dN += w[k] * P.bound[at] +
                dw[k] * (std::fabs(static_cast<double>(parts[at])) + P.bound[at]);
        }
        const U e = (r * nq + h) * hd + d;
        const double v1 = core.value[e];
        const double delta = (dN + std::fabs(v1) * dD) / D;
        bound[e] = oracle::stored_bf16(merge.value[e], merge.bound[e]) +
                   oracle::stored_bf16(v1, delta + kFp64Slack * (1.0 + std::fabs(v1))) +
                   oracle::stored_bf16(v1, core.bound[e]);
      }
    }

  const std::vector<double> out1 = live_out(c1, r1);
  std::vector<double> outS = live_out(cS, rS);
  if (plant) {
    // Drop one part's rescale per (row, head): the smallest-m non-empty part gets m = the parts'
    // maximum, as if its e^(m_k − M) were never applied.
    std::vector<float> bad = parts;
    bool moved = false;
    for (U rh = 0; rh < live * nq; ++rh) {
      float mx = -std::numeric_limits<float>::infinity(), mn = mx;
      U kmin = S;
      for (U k = 0; k < S; ++k) {
        const U at = rh * S * slot + k * slot;
        if (!(bad[at + hd + 1] > 0.0f)) continue;
        mx = std::max(mx, bad[at + hd]);
        if (kmin == S || bad[at + hd] < mn) mn = bad[at + hd], kmin = k;
      }
      if (kmin < S && mn < mx - 0.5f) {
        bad[rh * S * slot + kmin * slot + hd] = mx;
        moved = true;
      }
    }
    if (!moved) return {};  // not applicable: no part to mis-rescale
    const oracle::AttnValues twin = oracle::attn_merge_fp64(live, nq, hd, S, bad, cS.sinks);
    for (U i = 0; i < outS.size(); ++i) outS[i] = oracle::round_bf16(twin.value[i]);
  }
  // Compare outS against out1 taken as the reference (round_bf16 of a BF16 value is itself).
  AttnBoundResult r = worst_ratio(outS, out1, bound, geo.q_width());
  return r;
}

AttnBoundResult attn_sliding_vs_window(Backend& b, AttnCase c, bool plant,
                                       const oracle::BoundModel& bm) {
  if (c.decode.live == 0 || c.decode.splits != 1 || !c.sliding)
    throw Error("attn_sliding_vs_window: needs live decode rows, one split, a sliding layer");
  const AttnGeometry& geo = c.geom;
  const U W = geo.window, kw = geo.kv_width(), hd = geo.hd;
  if (plant) {
    // The key just below each window gets V = 64 in the cache: invisible to the sliding row (its
    // output cannot move), but the one-key-wider reference reads it with weight ≥ ~e^-8 / W, far
    // more than a BF16 step of an output of size ~1 (a key of ordinary V can cancel out).
    const U R = c.decode.rows, bs = c.cache.block_size, mb = c.decode.block_table.size() / R;
    for (U r = 0; r < c.decode.live; ++r) {
      const U p = static_cast<U>(c.decode.seq_lens[r]) - 1, lo = oracle::attn_first_key(p, W);
      if (lo == 0) continue;
      const U slot =
          static_cast<U>(c.decode.block_table[r * mb + (lo - 1) / bs]) * bs + (lo - 1) % bs;
      for (U e = 0; e < kw; ++e) c.v_cache[slot * kw + e] = 0x4280;
    }
  }
  const AttnRun run = oracle::run_attention(b, c);
  DecodeRows full = decode_rows(c, run, bm);
  const oracle::AttnValues sl = oracle::attn_core_fp64(geo, full.input(c, W), &bm);
  // The window's keys as sequences of their own; the twin one key wider where there is one.
  DecodeRows cut = full;
  bool wider = false;
  for (U r = 0; r < cut.k.size(); ++r) {
    const U p = cut.pos[r];
    U lo = oracle::attn_first_key(p, W);
    if (plant && lo > 0) --lo, wider = true;
    cut.k[r].assign(full.k[r].begin() + static_cast<std::ptrdiff_t>(lo * kw), full.k[r].end());
    cut.v[r].assign(full.v[r].begin() + static_cast<std::ptrdiff_t>(lo * kw), full.v[r].end());
    cut.n[r] = p + 1 - lo;
    cut.pos[r] = p - lo;
  }
  if (plant && !wider) return {};  // not applicable: every window starts at key 0
  const oracle::AttnValues ref = oracle::attn_core_fp64(geo, cut.input(c, 0));
  std::vector<double> bound(ref.value.size());
  for (U e = 0; e < bound.size(); ++e)
    bound[e] = oracle::stored_bf16(ref.value[e],
                                   sl.bound[e] + kFp64Slack * (1.0 + std::fabs(ref.value[e])));
  AttnBoundResult r = worst_ratio(live_out(c, run), ref.value, bound, geo.nq * hd);
  return r;
}

AttnBoundResult attn_sink_share(Backend& b, AttnCase c, bool plant, const oracle::BoundModel& bm) {
  if (c.decode.live == 0 || c.decode.splits != 1 || c.sinks.empty())
    throw Error("attn_sink_share: needs live decode rows, one split, sinks");
  const AttnGeometry& geo = c.geom;
  const U kw = geo.kv_width(), hd = geo.hd, nq = geo.nq, window = c.sliding ? geo.window : 0;
  for (U r = 0; r < c.decode.rows; ++r)
    for (U e = 0; e < kw; ++e) c.qkv[r * geo.qkv_dim + geo.v_col0 + e] = kBf16One;
  for (uint16_t& x : c.v_cache)
    if (x != oracle::kAttnCachePoison) x = kBf16One;
  const AttnRun run = oracle::run_attention(b, c);
  DecodeRows d = decode_rows(c, run, bm);
  const oracle::AttnValues core = oracle::attn_core_fp64(geo, d.input(c, window), &bm);
  // m and l of each row's keys without the sink: the one part of S = 1 (FP64 maximum).
  const oracle::AttnValues part =
      oracle::attn_partials_fp64(geo, d.input(c, window), 1, c.cache.block_size);
  std::vector<double> expected(core.value.size()), bound(core.value.size());
  double max_share = 0.0;
  for (U r = 0; r < c.decode.live; ++r)
    for (U h = 0; h < nq; ++h) {
      const U at = (r * nq + h) * (hd + 2);
      const double m = part.value[at + hd], l = part.value[at + hd + 1];
      const double sink = std::exp(static_cast<double>(c.sinks[h]) - m);
      const double o = l / (l + sink);
      max_share = std::max(max_share, 1.0 - o);
      for (U dd = 0; dd < hd; ++dd) {
        const U e = (r * nq + h) * hd + dd;
        expected[e] = plant ? 1.0 : o;  // twin: the sink ignored
        bound[e] = oracle::stored_bf16(o, core.bound[e] + kFp64Slack * 2.0);
      }
    }
  // The twin can fail only where the sink's share shows in BF16 near 1 (ulp 2^-7 below 2).
  if (plant && !(max_share > 0x1p-4)) return {};  // not applicable: no visible sink share
  AttnBoundResult r = worst_ratio(live_out(c, run), expected, bound, nq * hd);
  return r;
}
}  // namespace bufferlab::gen
