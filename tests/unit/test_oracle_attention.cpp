// The FP64 oracle of attention (oracle/attention.h, attention_judge.h): the stage function and
// the core against hand-worked values, split-K + merge against one split in FP64, each bound
// against an FP32 evaluation of the pinned formulas (core ops/attention.h) — the bound holds and
// is not vacuous —, and the judge on a perfect run and on planted bugs, each failing its check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bufferlab/backends/backend_factory.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/attention.h"
#include "bufferlab/oracle/attention_harness.h"
#include "bufferlab/oracle/attention_inputs.h"
#include "bufferlab/oracle/attention_judge.h"
#include "bufferlab/oracle/seeded_random.h"
#include "bufferlab/properties/attention_generators.h"

namespace bufferlab::oracle {
namespace {

uint16_t bf(double v) { return f32_to_bf16_bits(static_cast<float>(v)); }
double val(uint16_t b) { return bf16_bits_to_f32(b); }
double round_bf(double v) { return val(bf(v)); }

AttnGeometry geometry(uint64_t nq, uint64_t nkv, uint64_t hd, uint64_t rd, bool gated) {
  AttnGeometry g;
  g.nq = nq;
  g.nkv = nkv;
  g.hd = hd;
  g.rotary_dim = rd;
  g.gated = gated;
  g.gate_col0 = gated ? nq * hd : 0;
  g.k_col0 = nq * hd * (gated ? 2 : 1);
  g.v_col0 = g.k_col0 + nkv * hd;
  g.qkv_dim = g.v_col0 + nkv * hd;
  g.eps = 1e-6f;
  return g;
}

// --- stage function: hand-worked ----------------------------------------------------------------

// One head, hd 4, rotary_dim 4, inv_freq {1, fp32(0.01)}, af 1, positions 0, 1, 2.
struct OneHead {
  AttnGeometry g = geometry(1, 1, 4, 4, false);
  std::vector<uint16_t> x;
  std::vector<float> rope{1.0f, 0.01f, 1.0f};
  std::vector<uint32_t> pos{0, 1, 2};
  OneHead() {
    for (int r = 0; r < 3; ++r)
      for (double v : {1.0, 2.0, 3.0, 4.0}) x.push_back(bf(v));
  }
  AttnStageInput input(std::span<const uint16_t> norm = {}) const {
    return AttnStageInput{x, 4, 0, 3, 1, pos, 3, rope, norm};
  }
};

TEST(OracleAttentionStage, HandWorkedHalfSplitPairs) {
  const OneHead h;
  const AttnValues v = attn_stage_fp64(h.g, h.input(), Mode::faithful);
  // Position 0: the identity.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(v.value[i], i + 1.0);
  // Position 1, pairs (0, 2) at θ = 1 and (1, 3) at θ = fp32(0.01):
  //   y0 = 1·cos 1 − 3·sin 1, y2 = 3·cos 1 + 1·sin 1, y1 = 2·cos θ1 − 4·sin θ1, y3 = 4·cos θ1 +
  //   2·sin θ1.
  EXPECT_NEAR(v.value[4], -1.9841106485555495, 1e-15);
  EXPECT_NEAR(v.value[6], 2.4623779024123156, 1e-15);
  EXPECT_NEAR(v.value[5], 1.959900668395159, 1e-15);
  EXPECT_NEAR(v.value[7], 4.019799667896923, 1e-15);
}

TEST(OracleAttentionStage, HandWorkedInterleavedPairsAndPassThrough) {
  OneHead h;
  h.g.rope_interleaved = true;
  const AttnValues v = attn_stage_fp64(h.g, h.input(), Mode::faithful);
  // Position 1, pairs (0, 1) at θ = 1 and (2, 3) at θ = fp32(0.01).
  EXPECT_NEAR(v.value[4], std::cos(1.0) - 2 * std::sin(1.0), 1e-15);
  EXPECT_NEAR(v.value[5], 2 * std::cos(1.0) + std::sin(1.0), 1e-15);
  // Partial rotary (rotary_dim 2, one frequency): dims 2, 3 pass through, bound 0 (a copy).
  OneHead p;
  p.g.rotary_dim = 2;
  p.rope = {1.0f, 1.0f};
  const AttnValues w = attn_stage_fp64(p.g, p.input(), Mode::faithful);
  EXPECT_EQ(w.value[6], 3.0);
  EXPECT_EQ(w.value[7], 4.0);
  const BoundModel bm = cpu_bounds();
  const AttnValues wb = attn_stage_fp64(p.g, p.input(), Mode::faithful, &bm);
  EXPECT_EQ(wb.bound[6], 0.0);
  EXPECT_GT(wb.bound[4], 0.0);
}

TEST(OracleAttentionStage, HandWorkedQkNorm) {
  OneHead h;
  h.g.qk_norm = true;
  h.g.rotary_dim = 0;
  const std::vector<uint16_t> w{bf(0.0), bf(0.5), bf(-0.5), bf(1.0)};
  const AttnValues v = attn_stage_fp64(h.g, h.input(w), Mode::faithful);
  // ss = 30, mean 7.5: n_i = x_i / sqrt(7.5 + 1e-6) · (1 + w_i).
  const double inv = 1.0 / std::sqrt(7.5 + static_cast<double>(1e-6f));
  EXPECT_NEAR(v.value[0], 1.0 * inv, 1e-15);
  EXPECT_NEAR(v.value[1], 2.0 * inv * 1.5, 1e-15);
  EXPECT_NEAR(v.value[2], 3.0 * inv * 0.5, 1e-15);
  EXPECT_NEAR(v.value[3], 4.0 * inv * 2.0, 1e-15);
}

TEST(OracleAttentionStage, MropeStreamsBothLayouts) {
  AttnGeometry g = geometry(1, 1, 16, 12, false);
  g.mrope = true;
  g.mrope_section = {2, 2, 2};
  std::vector<uint64_t> got;
  for (uint64_t i = 0; i < 6; ++i) got.push_back(attn_rope_stream(g, i));
  EXPECT_EQ(got, (std::vector<uint64_t>{0, 0, 1, 1, 2, 2}));
  g.mrope_interleaved = true;
  g.mrope_section = {3, 2, 1};
  got.clear();
  for (uint64_t i = 0; i < 6; ++i) got.push_back(attn_rope_stream(g, i));
  // h when i % 3 = 1 and i < 6; w when i % 3 = 2 and i < 3.
  EXPECT_EQ(got, (std::vector<uint64_t>{0, 1, 2, 0, 1, 0}));
  g.mrope = false;
  EXPECT_EQ(attn_rope_stream(g, 4), 0u);
}

TEST(OracleAttentionStage, MropeWithEqualStreamsIsOneDimensional) {
  AttnGeometry g = geometry(1, 1, 8, 8, false);
  SplitMix64 rng(5);
  std::vector<uint16_t> x;
  for (int i = 0; i < 16; ++i) x.push_back(bf(rng.normalish()));
  std::vector<float> rope{1.0f, 0.1f, 0.01f, 0.001f, 1.0f};
  std::vector<uint32_t> one{7, 300}, three{7, 300, 7, 300, 7, 300};
  const AttnValues a = attn_stage_fp64(g, {x, 8, 0, 2, 1, one, 2, rope, {}}, Mode::faithful);
  g.mrope = true;
  g.mrope_section = {2, 1, 1};
  const AttnValues b = attn_stage_fp64(g, {x, 8, 0, 2, 1, three, 2, rope, {}}, Mode::faithful);
  EXPECT_EQ(a.value, b.value);
}

// --- the FP32 evaluations of the pinned formulas -------------------------------------------------

// S(x) in FP32 exactly as ops/attention.h pins it, then the BF16 store.
std::vector<uint16_t> stage_fp32(const AttnGeometry& g, const AttnStageInput& in) {
  std::vector<uint16_t> out;
  const uint64_t hd = g.hd, half = g.rotary_dim / 2;
  for (uint64_t r = 0; r < in.rows; ++r)
    for (uint64_t h = 0; h < in.heads; ++h) {
      std::vector<float> n(hd);
      const uint16_t* x = in.src.data() + r * in.stride + in.col0 + h * hd;
      float ss = 0.0f;
      for (uint64_t i = 0; i < hd; ++i) ss += bf16_bits_to_f32(x[i]) * bf16_bits_to_f32(x[i]);
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(hd) + g.eps);
      for (uint64_t i = 0; i < hd; ++i)
        n[i] = g.qk_norm ? (bf16_bits_to_f32(x[i]) * inv) * (1.0f + bf16_bits_to_f32(in.norm[i]))
                         : bf16_bits_to_f32(x[i]);
      std::vector<float> y = n;
      const float af = half > 0 ? in.rope[half] : 1.0f;
      for (uint64_t i = 0; i < half; ++i) {
        const uint64_t ia = g.rope_interleaved ? 2 * i : i,
                       ib = g.rope_interleaved ? 2 * i + 1 : i + half;
        const float th =
            static_cast<float>(in.positions[attn_rope_stream(g, i) * in.pos_stride + r]) *
            in.rope[i];
        const float c = std::cos(th) * af, s = std::sin(th) * af;
        const float p1 = n[ia] * c, p2 = n[ib] * s, p3 = n[ib] * c, p4 = n[ia] * s;
        y[ia] = p1 - p2;
        y[ib] = p3 + p4;
      }
      for (float v : y) out.push_back(f32_to_bf16_bits(v));
    }
  return out;
}

// The max over elements of |got − want| / bound (0/0 = 0); fails on an element past its bound.
double max_ratio(std::span<const uint16_t> got, const AttnValues& ref) {
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(val(got[i]) - round_bf16(ref.value[i]));
    EXPECT_LE(d, ref.bound[i]) << "element " << i;
    if (ref.bound[i] > 0.0)
      worst = std::max(worst, d / ref.bound[i]);
    else
      EXPECT_EQ(d, 0.0) << "copied element " << i;
  }
  return worst;
}

TEST(OracleAttentionBounds, StageBoundHoldsForFp32AtLongPositions) {
  const BoundModel bm = cpu_bounds();
  double worst = 0.0, worst_angle = 0.0, max_bound_ulps = 0.0, uncertain = 0.0, elements = 0.0;
  for (bool qk : {false, true})
    for (bool inter : {false, true}) {
      AttnGeometry g = geometry(2, 1, 64, 48, false);
      g.qk_norm = qk;
      g.rope_interleaved = inter;
      SplitMix64 rng(11 + qk + 2 * inter);
      const uint64_t rows = 64;
      std::vector<uint16_t> x, w;
      for (uint64_t i = 0; i < rows * 128; ++i) x.push_back(bf(rng.normalish() * 3.0));
      for (int i = 0; i < 64; ++i) w.push_back(bf(rng.normalish() * 0.25));
      std::vector<float> rope;
      for (int i = 0; i < 24; ++i) rope.push_back(static_cast<float>(std::pow(10000.0, -i / 24.0)));
      rope.push_back(1.2f);
      std::vector<uint32_t> pos;
      for (uint64_t r = 0; r < rows; ++r)
        pos.push_back(static_cast<uint32_t>(r * 1601 + 3));  // to ~1e5
      const AttnStageInput in{
          x,    128,  0,
          rows, 2,    pos,
          rows, rope, qk ? std::span<const uint16_t>(w) : std::span<const uint16_t>()};
      const AttnValues f = attn_stage_fp64(g, in, Mode::faithful, &bm);
      const std::vector<uint16_t> got = stage_fp32(g, in);
      worst = std::max(worst, max_ratio(got, f));
      // The stored value the decode core's fused stage holds: known exactly except next to a
      // BF16 rounding boundary, and then within its uncertainty.
      const AttnValues st = attn_stage_stored(g, in, bm);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(val(got[i]) - st.value[i]), st.bound[i]) << "element " << i;
        uncertain += st.bound[i] > 0.0;
        elements += 1;
      }
      for (size_t i = 0; i < f.bound.size(); ++i)
        if (f.bound[i] > 0.0)
          max_bound_ulps = std::max(max_bound_ulps, f.bound[i] / bf16_ulp_at(f.value[i]));
      // Faithful vs exact: within the derived angle bound, which the FP32 angle really uses.
      const AttnValues e = attn_stage_fp64(g, in, Mode::exact);
      const std::vector<double> ab = attn_stage_angle_bounds(g, in);
      for (size_t i = 0; i < ab.size(); ++i) {
        const double d = std::fabs(f.value[i] - e.value[i]);
        ASSERT_LE(d, ab[i]) << "element " << i;
        if (ab[i] > 1e-9) worst_angle = std::max(worst_angle, d / ab[i]);
      }
    }
  std::printf(
      "  stage: FP32 max |err|/bound %.3f (bound <= %.2f BF16 ulps); faithful vs exact "
      "max |diff|/angle bound %.3f\n",
      worst, max_bound_ulps, worst_angle);
  // Not vacuous: what FP32 really does reaches the bound (a BF16 store on the other side of a
  // rounding boundary costs the full ULP the bound allows); the bound is a few BF16 ULPs at
  // most (more than one only where a·c − b·s cancels: the bound is relative to |a·c| + |b·s|).
  EXPECT_GT(worst, 0.3);
  EXPECT_LT(max_bound_ulps, 4.0);
  std::printf("  stage: stored BF16 uncertain on %.2f %% of the elements\n",
              100.0 * uncertain / elements);
  EXPECT_LT(uncertain, 0.05 * elements);
  EXPECT_GT(worst_angle, 0.05);  // the FP32 angle error at |θ| ~ 1e5 is of the bound's order
}

// The core of one (row, head) in FP32 by the pinned reduction (tiles of 64 absolute positions).
std::vector<float> core_fp32(const std::vector<std::vector<float>>& k,
                             const std::vector<std::vector<float>>& v, const std::vector<float>& q,
                             uint64_t lo, uint64_t p, bool sink, float sink_v, float& m_out,
                             float& l_out) {
  const uint64_t hd = q.size();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  float m = -INFINITY, l = 0.0f;
  std::vector<float> acc(hd, 0.0f);
  for (uint64_t t0 = lo / 64 * 64; t0 <= p; t0 += 64) {
    const uint64_t a = std::max(lo, t0), b = std::min(p, t0 + 63);
    std::vector<float> s;
    float mt = m;
    for (uint64_t j = a; j <= b; ++j) {
      float d = 0.0f;
      for (uint64_t i = 0; i < hd; ++i) d += q[i] * k[j][i];
      s.push_back(d * scale);
      mt = std::max(mt, s.back());
    }
    const float alpha = m == -INFINITY ? 0.0f : std::exp(m - mt);
    l *= alpha;
    for (float& x : acc) x *= alpha;
    for (uint64_t j = a; j <= b; ++j) {
      const float e = std::exp(s[j - a] - mt);
      l += e;
      for (uint64_t i = 0; i < hd; ++i) acc[i] += e * v[j][i];
    }
    m = mt;
  }
  m_out = m;
  if (sink) {
    const float m2 = std::max(m, sink_v), alpha = std::exp(m - m2);
    l = l * alpha + std::exp(sink_v - m2);
    for (float& x : acc) x *= alpha;
  }
  l_out = l;
  for (float& x : acc) x /= l;
  return acc;
}

TEST(OracleAttentionBounds, CoreBoundHoldsForFp32) {
  const BoundModel bm = cpu_bounds();
  double worst = 0.0, worst_partial = 0.0, worst_merge = 0.0;
  for (uint64_t window : {0u, 50u})
    for (bool sinks : {false, true}) {
      const AttnGeometry g = geometry(4, 2, 32, 32, false);
      const uint64_t n = 300, kvw = g.kv_width();
      SplitMix64 rng(window + sinks);
      std::vector<uint16_t> kb, vb;
      for (uint64_t i = 0; i < n * kvw; ++i) {
        kb.push_back(bf(rng.normalish() * 2.0));
        vb.push_back(bf(rng.normalish()));
      }
      std::vector<double> q;
      std::vector<uint64_t> pos, seq;
      for (uint64_t p : {0u, 1u, 63u, 64u, 150u, 299u}) {
        for (uint64_t i = 0; i < g.q_width(); ++i) q.push_back(round_bf(rng.normalish() * 2.0));
        pos.push_back(p);
        seq.push_back(0);
      }
      std::vector<float> sk{0.5f, -1.0f, 3.0f, 0.0f};
      const std::vector<AttnKeys> keys{AttnKeys{kb, vb, n}};
      const AttnCoreInput in{q,      {},
                             pos,    seq,
                             keys,   sinks ? std::span<const float>(sk) : std::span<const float>(),
                             window, AttnVariant::spec};
      const AttnValues ref = attn_core_fp64(g, in, &bm);
      std::vector<uint16_t> got;
      for (size_t r = 0; r < pos.size(); ++r)
        for (uint64_t h = 0; h < g.nq; ++h) {
          const uint64_t kh = h / g.group();
          std::vector<std::vector<float>> K(n), V(n);
          for (uint64_t j = 0; j < n; ++j)
            for (uint64_t d = 0; d < g.hd; ++d) {
              K[j].push_back(static_cast<float>(val(kb[j * kvw + kh * g.hd + d])));
              V[j].push_back(static_cast<float>(val(vb[j * kvw + kh * g.hd + d])));
            }
          std::vector<float> qq(
              q.begin() + static_cast<std::ptrdiff_t>(r * g.q_width() + h * g.hd),
              q.begin() + static_cast<std::ptrdiff_t>(r * g.q_width() + (h + 1) * g.hd));
          float m, l;
          for (float o :
               core_fp32(K, V, qq, attn_first_key(pos[r], window), pos[r], sinks, sk[h], m, l))
            got.push_back(f32_to_bf16_bits(o));
        }
      worst = std::max(worst, max_ratio(got, ref));
      // Split-K in FP64 equals one split (no sinks in the parts; the merge adds them), up to the
      // FP32 rounding of the stored partials (a few u relative).
      AttnCoreInput pin = in;
      pin.sinks = {};
      const AttnValues parts = attn_partials_fp64(g, pin, 3, 16);
      std::vector<float> pf(parts.value.begin(), parts.value.end());
      const AttnValues merged = attn_merge_fp64(pos.size(), g.nq, g.hd, 3, pf, in.sinks, &bm);
      for (size_t i = 0; i < merged.value.size(); ++i)
        ASSERT_NEAR(merged.value[i], ref.value[i], 1e-6 * (1 + std::fabs(ref.value[i])));
      // The parts and the merge in FP32 against their bounds (l against the stored m).
      const uint64_t S = 3, slot = g.hd + 2;
      std::vector<float> p32(pos.size() * g.nq * S * slot, 0.0f);
      for (size_t r = 0; r < pos.size(); ++r)
        for (uint64_t h = 0; h < g.nq; ++h) {
          const uint64_t kh = h / g.group();
          std::vector<std::vector<float>> K(n), V(n);
          for (uint64_t j = 0; j < n; ++j)
            for (uint64_t d = 0; d < g.hd; ++d) {
              K[j].push_back(static_cast<float>(val(kb[j * kvw + kh * g.hd + d])));
              V[j].push_back(static_cast<float>(val(vb[j * kvw + kh * g.hd + d])));
            }
          const std::vector<float> qq(
              q.begin() + static_cast<std::ptrdiff_t>(r * g.q_width() + h * g.hd),
              q.begin() + static_cast<std::ptrdiff_t>(r * g.q_width() + (h + 1) * g.hd));
          for (uint64_t k = 0; k < S; ++k) {
            float* o = p32.data() + ((r * g.nq + h) * S + k) * slot;
            uint64_t a = 0, b = 0;
            if (!attn_split_range(attn_first_key(pos[r], window), pos[r], 16, S, k, a, b)) {
              o[g.hd] = -INFINITY;
              continue;
            }
            float m = 0, l = 0;
            const std::vector<float> ov = core_fp32(K, V, qq, a, b, false, 0.0f, m, l);
            std::copy(ov.begin(), ov.end(), o);
            o[g.hd] = m;
            o[g.hd + 1] = l;
          }
        }
      const AttnValues pref = attn_partials_fp64(g, pin, S, 16, p32, &bm);
      for (size_t i = 0; i < p32.size(); ++i) {
        const double d = std::isinf(pref.value[i]) ? 0.0 : std::fabs(p32[i] - pref.value[i]);
        ASSERT_LE(d, pref.bound[i]) << "partial element " << i;
        if (pref.bound[i] > 0.0) worst_partial = std::max(worst_partial, d / pref.bound[i]);
      }
      // The merge in FP32 (ops/attention.h "Merge") from those stored partials.
      const AttnValues mref = attn_merge_fp64(pos.size(), g.nq, g.hd, S, p32, in.sinks, &bm);
      std::vector<uint16_t> mgot;
      for (size_t r = 0; r < pos.size(); ++r)
        for (uint64_t h = 0; h < g.nq; ++h) {
          const float* pp = p32.data() + (r * g.nq + h) * S * slot;
          float M = sinks ? sk[h] : -INFINITY;
          for (uint64_t k = 0; k < S; ++k)
            if (pp[k * slot + g.hd + 1] > 0.0f) M = std::max(M, pp[k * slot + g.hd]);
          float L = 0.0f;
          std::vector<float> num(g.hd, 0.0f);
          for (uint64_t k = 0; k < S; ++k) {
            const float* pk = pp + k * slot;
            if (!(pk[g.hd + 1] > 0.0f)) continue;
            const float w = pk[g.hd + 1] * std::exp(pk[g.hd] - M);
            L += w;
            for (uint64_t d = 0; d < g.hd; ++d) num[d] += w * pk[d];
          }
          if (sinks) L += std::exp(sk[h] - M);
          for (float x : num) mgot.push_back(f32_to_bf16_bits(x / L));
        }
      worst_merge = std::max(worst_merge, max_ratio(mgot, mref));
    }
  std::printf("  partials: FP32 max |err|/bound %.3f; merge: %.3f\n", worst_partial, worst_merge);
  EXPECT_GT(worst_partial, 0.01);
  std::printf("  core: FP32 max |err|/bound %.3f\n", worst);
  EXPECT_GT(worst, 0.1);
}

TEST(OracleAttentionBounds, GateBoundHoldsForFp32) {
  const BoundModel bm = cpu_bounds();
  AttnGeometry g = geometry(2, 1, 8, 8, true);
  SplitMix64 rng(9);
  const uint64_t rows = 64;
  std::vector<uint16_t> attn, qkv(rows * g.qkv_dim, 0), got;
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < g.q_width(); ++c) {
      attn.push_back(bf(rng.normalish() * 4.0));
      // Gates over [−100, 30]: σ from below 2^-126 (expf(−g) overflows) to 1.
      qkv[r * g.qkv_dim + g.gate_col0 + c] = bf(rng.between(-100.0, 30.0));
    }
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < g.q_width(); ++c) {
      const float a = bf16_bits_to_f32(attn[r * g.q_width() + c]);
      const float gv = bf16_bits_to_f32(qkv[r * g.qkv_dim + g.gate_col0 + c]);
      got.push_back(f32_to_bf16_bits(a * (1.0f / (1.0f + std::exp(-gv)))));
    }
  const double w = max_ratio(got, attn_gate_fp64(g, rows, attn, qkv, &bm));
  std::printf("  gate: FP32 max |err|/bound %.3f\n", w);
  EXPECT_GT(w, 0.0);
  // The FP32 part of the bound is a few u (expf's (2·2 + 1)u, three roundings): the BF16 ULP of
  // the store is the rest.
  EXPECT_LT(attn_detail::gate_error(2.0, 1.5, bm),
            12.0 * 0x1p-24 * 1.5 + 2.0 * 0x1p-126 + 0x1p-149);
}

// --- core: hand-worked
// ----------------------------------------------------------------------------

// One head, hd 4 (scale 1/2 exactly), keys k_j = (j, 0, 0, 0), v_j = (j + 1, 0, 0, 0), q = (1, 0,
// 0, 0): scores s_j = j/2.
struct TinyCore {
  AttnGeometry g = geometry(1, 1, 4, 4, false);
  std::vector<uint16_t> k, v;
  std::vector<double> q;
  std::vector<uint64_t> pos{0, 1, 2}, seq{0, 0, 0};
  std::vector<AttnKeys> keys;
  TinyCore() {
    for (int j = 0; j < 3; ++j)
      for (int d = 0; d < 4; ++d) {
        k.push_back(bf(d == 0 ? j : 0));
        v.push_back(bf(d == 0 ? j + 1 : 0));
      }
    for (int r = 0; r < 3; ++r)
      for (int d = 0; d < 4; ++d) q.push_back(d == 0 ? 1.0 : 0.0);
    keys.push_back(AttnKeys{k, v, 3});
  }
  AttnCoreInput input() const { return {q, {}, pos, seq, keys, {}, 0, AttnVariant::spec}; }
};

TEST(OracleAttentionCore, HandWorkedCausalSoftmax) {
  const TinyCore t;
  const AttnValues o = attn_core_fp64(t.g, t.input());
  EXPECT_EQ(o.value[0], 1.0);  // position 0 sees key 0 only
  // Position 1: weights 1, e^0.5 over values 1, 2.
  EXPECT_NEAR(o.value[4], (1 + 2 * std::exp(0.5)) / (1 + std::exp(0.5)), 1e-15);
  // Position 2: weights 1, e^0.5, e^1 (sum 5.367003099159174) over 1, 2, 3.
  EXPECT_NEAR(o.value[8], 2.3201566678298065, 1e-14);
  // Sliding window 2: position 2 sees keys 1 and 2 only.
  AttnCoreInput w = t.input();
  w.window = 2;
  EXPECT_NEAR(attn_core_fp64(t.g, w).value[8], (2 + 3 * std::exp(0.5)) / (1 + std::exp(0.5)),
              1e-15);
  // The causal-leak variant at position 1 also sees key 2.
  AttnCoreInput leak = t.input();
  leak.variant = AttnVariant::causal_leak;
  EXPECT_NEAR(attn_core_fp64(t.g, leak).value[4], 2.3201566678298065, 1e-14);
}

TEST(OracleAttentionCore, HandWorkedSinkJoinsDenominatorOnly) {
  const TinyCore t;
  AttnCoreInput in = t.input();
  const std::vector<float> sink{0.5f};
  in.sinks = sink;
  // Position 1: (1·1 + 2·e^0.5) / (1 + e^0.5 + e^0.5).
  EXPECT_NEAR(attn_core_fp64(t.g, in).value[4], (1 + 2 * std::exp(0.5)) / (1 + 2 * std::exp(0.5)),
              1e-15);
}

TEST(OracleAttentionCore, GqaMapAndSplitRanges) {
  // nq 4, nkv 2: heads 0, 1 read KV head 0; 2, 3 read KV head 1 (q % nkv would swap 1 and 2).
  const AttnGeometry g = geometry(4, 2, 4, 4, false);
  std::vector<uint16_t> k(2 * 8, bf(0.0)), v;
  for (int j = 0; j < 2; ++j)
    for (int h = 0; h < 2; ++h)
      for (int d = 0; d < 4; ++d) v.push_back(bf(10 * h + j));
  std::vector<double> q(16, 0.0);
  std::vector<uint64_t> pos{1}, seq{0};
  const std::vector<AttnKeys> keys{AttnKeys{k, v, 2}};
  AttnCoreInput in{q, {}, pos, seq, keys, {}, 0, AttnVariant::spec};
  const AttnValues o = attn_core_fp64(g, in);  // equal scores: the mean of the two values
  EXPECT_EQ(o.value[1 * 4], 0.5);
  EXPECT_EQ(o.value[2 * 4], 10.5);
  in.variant = AttnVariant::gqa_modulo;
  EXPECT_EQ(attn_core_fp64(g, in).value[1 * 4], 10.5);
  // Split ranges: keys [5, 40] in blocks of 16 → blocks 0..2, 2 splits of 2 blocks.
  uint64_t a = 0, b = 0;
  ASSERT_TRUE(attn_split_range(5, 40, 16, 2, 0, a, b));
  EXPECT_EQ(a, 5u);
  EXPECT_EQ(b, 31u);
  ASSERT_TRUE(attn_split_range(5, 40, 16, 2, 1, a, b));
  EXPECT_EQ(a, 32u);
  EXPECT_EQ(b, 40u);
  EXPECT_FALSE(attn_split_range(5, 10, 16, 2, 1, a, b));  // one block: part 1 empty
}

// --- the judge
// --------------------------------------------------------------------------------------

struct CaseOpts {
  bool qk_norm = false, mrope = false, gated = true, sinks = true, sliding = false;
  uint64_t splits = 2;
};

// A small pass by hand (not the harness's generator): 2 prefill streams of 5 tokens with 3 and 6
// cached keys, 3 decode rows (2 live) with 4 and 8 cached keys, blocks of 4 shuffled, every slot
// no sequence owns poisoned.
AttnCase make_case(const CaseOpts& o, uint64_t seed) {
  AttnCase c;
  AttnGeometry g = geometry(4, 2, 8, 4, o.gated);
  g.qk_norm = o.qk_norm;
  g.sinks = o.sinks;
  g.window = o.sliding ? 5 : 0;
  if (o.mrope) {
    g.mrope = true;
    g.mrope_section = {1, 1, 0};
  }
  c.geom = g;
  c.sliding = o.sliding;
  const uint64_t bs = 4;
  SplitMix64 rng(seed);
  c.prefill.streams = 2;
  c.prefill.L = 5;
  c.prefill.ctx_lens = {3, 6};
  c.decode.rows = 3;
  c.decode.live = 2;
  c.decode.splits = o.splits;
  c.decode.seq_lens = {5, 9, 5};
  const std::vector<uint64_t> lens{8, 11, 5, 9};  // prefill streams' and decode rows' totals
  uint64_t nb = 1;                                // one spare block
  for (uint64_t n : lens) nb += (n + bs - 1) / bs;
  std::vector<uint64_t> perm(nb);
  for (uint64_t i = 0; i < nb; ++i) perm[i] = i;
  for (uint64_t i = nb - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
  c.cache.block_size = bs;
  c.cache.num_blocks = nb;
  const uint64_t max_blocks = 4;
  c.cache.max_blocks = max_blocks;
  std::vector<std::vector<int32_t>> tables;
  uint64_t next = 0;
  for (uint64_t n : lens) {
    std::vector<int32_t> row(max_blocks, -1);
    for (uint64_t b = 0; b < (n + bs - 1) / bs; ++b) row[b] = static_cast<int32_t>(perm[next++]);
    tables.push_back(row);
  }
  for (int s = 0; s < 2; ++s)
    c.prefill.block_table.insert(c.prefill.block_table.end(), tables[s].begin(), tables[s].end());
  for (int r : {0, 1, 0}) {
    const auto& t = tables[2 + r];
    c.decode.block_table.insert(c.decode.block_table.end(), t.begin(), t.end());
  }
  auto slot = [&](const std::vector<int32_t>& t, uint64_t j) {
    return static_cast<int64_t>(t[j / bs]) * static_cast<int64_t>(bs) +
           static_cast<int64_t>(j % bs);
  };
  const uint64_t kvw = g.kv_width(), slots = nb * bs, t = 10, R = 3;
  c.k_cache.assign(slots * kvw, kAttnCachePoison);
  c.v_cache.assign(slots * kvw, kAttnCachePoison);
  auto fill_prefix = [&](const std::vector<int32_t>& tb, uint64_t n) {
    for (uint64_t j = 0; j < n; ++j)
      for (uint64_t i = 0; i < kvw; ++i) {
        c.k_cache[static_cast<uint64_t>(slot(tb, j)) * kvw + i] = bf(rng.normalish());
        c.v_cache[static_cast<uint64_t>(slot(tb, j)) * kvw + i] = bf(rng.normalish());
      }
  };
  fill_prefix(tables[0], 3);
  fill_prefix(tables[1], 6);
  fill_prefix(tables[2], 4);
  fill_prefix(tables[3], 8);
  for (uint64_t b = 0; b < 2; ++b)
    for (uint64_t i = 0; i < 5; ++i)
      c.prefill.slots.push_back(slot(tables[b], c.prefill.ctx_lens[b] + i));
  c.decode.slots = {slot(tables[2], 4), slot(tables[3], 8), -1};
  const uint64_t streams = g.pos_streams();
  c.prefill.positions.assign(streams * t, 0);
  c.decode.positions.assign(streams * R, 0);
  for (uint64_t s = 0; s < streams; ++s) {
    for (uint64_t i = 0; i < t; ++i)
      c.prefill.positions[s * t + i] =
          static_cast<uint32_t>(c.prefill.ctx_lens[i / 5] + i % 5 + 100 + s * (1 + i % 3));
    for (uint64_t r = 0; r < R; ++r)
      c.decode.positions[s * R + r] =
          static_cast<uint32_t>(c.decode.seq_lens[r] - 1 + 100 + s * (1 + r % 3));
  }
  c.qkv.resize((R + t) * g.qkv_dim);
  for (uint16_t& x : c.qkv) x = bf(rng.normalish());
  c.rope = {1.0f, 0.01f, 1.1f};
  if (o.qk_norm)
    for (uint64_t i = 0; i < g.hd; ++i) {
      c.q_norm.push_back(bf(rng.normalish() * 0.25));
      c.k_norm.push_back(bf(rng.normalish() * 0.25));
    }
  if (o.sinks)
    for (uint64_t h = 0; h < g.nq; ++h) c.sinks.push_back(static_cast<float>(rng.normalish()));
  return c;
}

const TensorComparison* find(const AgreementReport& r, const std::string& name) {
  for (const auto& c : r.checks)
    if (c.name == name) return &c;
  return nullptr;
}

std::string failing(const AgreementReport& r) {
  std::string s;
  for (const auto& c : r.checks)
    if (!c.passed()) s += c.name + "; ";
  return s;
}

TEST(OracleAttentionJudge, PerfectRunAgreesOnEveryCheck) {
  for (bool qk : {false, true})
    for (bool mrope : {false, true})
      for (uint64_t splits : {1u, 3u}) {
        const CaseOpts o{qk, mrope, true, true, false, splits};
        const AttnCase c = make_case(o, 3);
        const AgreementReport r = judge_attention(c, perfect_attn_run(c), "perfect", 3);
        EXPECT_TRUE(r.passed()) << failing(r) << format_report(r);
        for (const char* name : {"q (stage)", "k (stage)", "v (copy)", "cache write (decode K)",
                                 "cache write (decode, copies)", "cache write (prefill)",
                                 "attn (prefill core)", "attn (prefill core, causal)", "gate"})
          EXPECT_NE(find(r, name), nullptr) << name;
        EXPECT_NE(find(r, splits > 1 ? "merge" : "attn (decode core)"), nullptr);
        if (!qk) {
          EXPECT_NE(find(r, "q (pass-through)"), nullptr);
        }
      }
}

// A planted bug: `mutate` changes the perfect run; the report must fail `expected` (and, when
// `first` is set, name it as the first failing check).
void expect_caught(const CaseOpts& o, const std::function<void(const AttnCase&, AttnRun&)>& mutate,
                   const std::string& expected, bool first = false) {
  const AttnCase c = make_case(o, 7);
  AttnRun run = perfect_attn_run(c);
  mutate(c, run);
  const AgreementReport r = judge_attention(c, run, "planted", 7);
  const TensorComparison* chk = find(r, expected);
  ASSERT_NE(chk, nullptr) << expected;
  EXPECT_FALSE(chk->passed()) << expected << " passed; failing: " << failing(r);
  if (first) {
    EXPECT_EQ(r.first_failure()->name, expected) << failing(r);
  }
  const std::string text = format_report(r);
  EXPECT_NE(text.find("seed 7"), std::string::npos);
  std::printf("  planted -> %s\n", chk->first_bad ? chk->first_bad->reason.c_str() : "?");
}

uint16_t bump(uint16_t b, int ulps) { return static_cast<uint16_t>(b + ulps); }

TEST(OracleAttentionJudge, PlantedStagingBugs) {
  // One element two BF16 ulps off, past the bound of ~1 ulp.
  expect_caught(
      {}, [](const AttnCase&, AttnRun& run) { run.q_copy[9] = bump(run.q_copy[9], 3); },
      "q (stage)");
  expect_caught(
      {}, [](const AttnCase&, AttnRun& run) { run.q_copy[6] = bump(run.q_copy[6], 1); },
      "q (pass-through)");
  expect_caught(
      {true}, [](const AttnCase&, AttnRun& run) { run.k_scratch[7] = bump(run.k_scratch[7], 3); },
      "k (stage)");
  expect_caught(
      {}, [](const AttnCase&, AttnRun& run) { run.v_scratch[3] ^= 1; }, "v (copy)");
  // MRoPE sections swapped: h and w positions exchanged for the staging.
  expect_caught(
      {false, true},
      [](const AttnCase& c, AttnRun& run) {
        AttnGeometry g = c.geom;
        g.mrope_section = {1, 0, 1};
        const uint64_t R = c.decode.rows, t = c.prefill.tokens();
        const AttnStageInput in{std::span<const uint16_t>(c.qkv).subspan(R * g.qkv_dim),
                                g.qkv_dim,
                                0,
                                t,
                                g.nq,
                                c.prefill.positions,
                                t,
                                c.rope,
                                {}};
        run.q_copy = {};
        for (double v : attn_stage_fp64(g, in, Mode::faithful).value)
          run.q_copy.push_back(bf(round_bf16(v)));
      },
      "q (stage)");
}

TEST(OracleAttentionJudge, PlantedCacheBugs) {
  expect_caught(
      {},
      [](const AttnCase& c, AttnRun& run) {
        run.v_cache_decode_write[static_cast<uint64_t>(c.decode.slots[1]) * c.geom.kv_width()] ^= 4;
      },
      "cache write (decode, copies)");
  expect_caught(
      {},
      [](const AttnCase& c, AttnRun& run) {
        const uint64_t at = static_cast<uint64_t>(c.decode.slots[0]) * c.geom.kv_width() + 2;
        run.k_cache_decode_write[at] = bump(run.k_cache_decode_write[at], 4);
      },
      "cache write (decode K)");
  // The prefill write puts token 3 of stream 0 one slot off.
  expect_caught(
      {},
      [](const AttnCase& c, AttnRun& run) {
        const uint64_t kvw = c.geom.kv_width(), s = static_cast<uint64_t>(c.prefill.slots[3]);
        std::copy_n(run.k_scratch.begin() + 3 * kvw, kvw, run.k_cache.begin() + (s ^ 1) * kvw);
      },
      "cache write (prefill)");
}

// The core's inputs as the backend stored them, gathered by the test itself (block tables read
// the right way, or — the planted bug — the logical block used as the physical one).
struct Gathered {
  std::vector<std::vector<uint16_t>> k, v;
  std::vector<AttnKeys> keys;
  std::vector<double> q, q_err;
  std::vector<uint64_t> pos, seq;
  AttnCoreInput input(const AttnCase& c, AttnVariant variant) const {
    return {q, q_err, pos, seq, keys, c.sinks, c.sliding ? c.geom.window : 0, variant};
  }
};

void push_slot(std::vector<uint16_t>& to, const std::vector<uint16_t>& from, uint64_t row,
               uint64_t w) {
  to.insert(to.end(), from.begin() + static_cast<std::ptrdiff_t>(row * w),
            from.begin() + static_cast<std::ptrdiff_t>((row + 1) * w));
}

Gathered gather_prefill(const AttnCase& c, const AttnRun& run, bool logical_blocks) {
  const uint64_t kvw = c.geom.kv_width(), bs = c.cache.block_size, L = c.prefill.L;
  const uint64_t S = c.prefill.streams, t = c.prefill.tokens(),
                 mb = c.prefill.block_table.size() / S;
  Gathered g;
  g.k.resize(S);
  g.v.resize(S);
  for (uint64_t b = 0; b < S; ++b) {
    const uint64_t ctx = static_cast<uint64_t>(c.prefill.ctx_lens[b]);
    for (uint64_t j = 0; j < ctx; ++j) {
      const uint64_t blk =
          logical_blocks ? j / bs : static_cast<uint64_t>(c.prefill.block_table[b * mb + j / bs]);
      push_slot(g.k[b], run.k_cache, blk * bs + j % bs, kvw);
      push_slot(g.v[b], run.v_cache, blk * bs + j % bs, kvw);
    }
    for (uint64_t i = 0; i <= L && b * L + i < t; ++i) {
      push_slot(g.k[b], run.k_scratch, b * L + i, kvw);
      push_slot(g.v[b], run.v_scratch, b * L + i, kvw);
    }
  }
  for (uint64_t b = 0; b < S; ++b) g.keys.push_back(AttnKeys{g.k[b], g.v[b], g.k[b].size() / kvw});
  for (uint16_t x : run.q_copy) g.q.push_back(val(x));
  for (uint64_t i = 0; i < t; ++i) {
    g.pos.push_back(static_cast<uint64_t>(c.prefill.ctx_lens[i / L]) + i % L);
    g.seq.push_back(i / L);
  }
  return g;
}

void set_prefill_out(AttnRun& run, const std::vector<double>& o) {
  run.prefill_out.clear();
  for (double x : o) run.prefill_out.push_back(bf(round_bf16(x)));
  run.attn = run.decode_out;
  run.attn.insert(run.attn.end(), run.prefill_out.begin(), run.prefill_out.end());
}

// The merge of the stored partials with the planted bugs: without the max rescale (l_k·o_k summed
// as if every part had the same maximum) or with the sink's weight added to the numerator.
std::vector<double> merge_variant(const AttnCase& c, const std::vector<float>& parts, bool rescale,
                                  bool sink_in_numerator) {
  const uint64_t nq = c.geom.nq, hd = c.geom.hd, S = c.decode.splits, slot = hd + 2;
  std::vector<double> out;
  for (uint64_t r = 0; r < c.decode.live; ++r)
    for (uint64_t q = 0; q < nq; ++q) {
      const float* p = parts.data() + (r * nq + q) * S * slot;
      double M = c.sinks.empty() ? -INFINITY : c.sinks[q];
      for (uint64_t k = 0; k < S; ++k)
        if (p[k * slot + hd + 1] > 0) M = std::max(M, static_cast<double>(p[k * slot + hd]));
      const double ws = c.sinks.empty() ? 0.0 : std::exp(c.sinks[q] - M);
      std::vector<double> num(hd, sink_in_numerator ? ws : 0.0);
      double L = ws;
      for (uint64_t k = 0; k < S; ++k) {
        const float* pk = p + k * slot;
        if (!(pk[hd + 1] > 0)) continue;
        const double w = pk[hd + 1] * (rescale ? std::exp(pk[hd] - M) : 1.0);
        L += w;
        for (uint64_t d = 0; d < hd; ++d) num[d] += w * pk[d];
      }
      for (double x : num) out.push_back(x / L);
    }
  return out;
}

void set_decode_out(AttnRun& run, const std::vector<double>& o) {
  for (size_t i = 0; i < o.size(); ++i) run.decode_out[i] = bf(round_bf16(o[i]));
  std::copy(run.decode_out.begin(), run.decode_out.end(), run.attn.begin());
}

TEST(OracleAttentionJudge, PlantedCoreBugs) {
  // M-CAUSAL: rows also attend to p + 1 — the causal diagnosis is the first failing check.
  expect_caught(
      {},
      [](const AttnCase& c, AttnRun& run) {
        set_prefill_out(
            run,
            attn_core_fp64(c.geom, gather_prefill(c, run, false).input(c, AttnVariant::causal_leak))
                .value);
      },
      "attn (prefill core, causal)", /*first=*/true);
  // Query head q reads KV head q % nkv.
  expect_caught(
      {},
      [](const AttnCase& c, AttnRun& run) {
        set_prefill_out(
            run,
            attn_core_fp64(c.geom, gather_prefill(c, run, false).input(c, AttnVariant::gqa_modulo))
                .value);
      },
      "attn (prefill core, GQA map)", /*first=*/true);
  // The logical block used as the physical one (blocks shuffled: poison or another sequence's
  // keys).
  expect_caught(
      {},
      [](const AttnCase& c, AttnRun& run) {
        set_prefill_out(
            run,
            attn_core_fp64(c.geom, gather_prefill(c, run, true).input(c, AttnVariant::spec)).value);
      },
      "attn (prefill core)", /*first=*/true);
  // One output element past its bound (2 % of its value).
  expect_caught(
      {false, false, true, false},
      [](const AttnCase&, AttnRun& run) {
        const double x = val(run.prefill_out[17]);
        run.prefill_out[17] = bf(x * 1.02 + 0.01);
        run.attn[3 * 32 + 17] = run.prefill_out[17];
      },
      "attn (prefill core)", /*first=*/true);
  // The decode core one split: a row that also sees p + 1 (a poisoned slot: NaN out).
  expect_caught(
      {false, false, true, true, false, 1},
      [](const AttnCase& c, AttnRun& run) {
        const uint64_t qw = c.geom.q_width();
        for (uint64_t i = 0; i < qw; ++i)
          run.decode_out[i] = 0xFFC0;  // NaN: key 5 of row 0 is poison
        std::copy(run.decode_out.begin(), run.decode_out.end(), run.attn.begin());
      },
      "attn (decode core, causal)", /*first=*/true);
  // Split-K merge without the max rescale; the sink added to the numerator.
  expect_caught(
      {false, false, true, true, false, 3},
      [](const AttnCase& c, AttnRun& run) {
        set_decode_out(run, merge_variant(c, run.partials, false, false));
      },
      "merge", /*first=*/true);
  expect_caught(
      {false, false, true, true, false, 3},
      [](const AttnCase& c, AttnRun& run) {
        set_decode_out(run, merge_variant(c, run.partials, true, true));
      },
      "merge", /*first=*/true);
  // A partial's maximum off by far more than the score error.
  expect_caught(
      {false, false, true, true, false, 3},
      [](const AttnCase& c, AttnRun& run) { run.partials[c.geom.hd] += 0.5f; },
      "partials (split-K)");
  // A padding row written.
  expect_caught(
      {false, false, true, true, false, 1},
      [](const AttnCase& c, AttnRun& run) {
        run.decode_out[2 * c.geom.q_width() + 5] = bf(1.0);
        std::copy(run.decode_out.begin(), run.decode_out.end(), run.attn.begin());
      },
      "pad rows (decode)");
  // The gate: one element off by 2 %.
  expect_caught(
      {},
      [](const AttnCase&, AttnRun& run) { run.gated[40] = bf(val(run.gated[40]) * 1.02 + 0.01); },
      "gate", /*first=*/true);
}

// The sink-numerator bug on the one-split decode core: o' = o + σ-share, seen by the core check.
TEST(OracleAttentionJudge, SinkInNumeratorOneSplit) {
  expect_caught(
      {false, false, true, true, false, 1},
      [](const AttnCase& c, AttnRun& run) {
        // Split the same rows into one part and merge with the bug: equal to the fused kernel's
        // bug.
        const uint64_t hd = c.geom.hd, nq = c.geom.nq, slot = hd + 2;
        const AttnCase cc = [&] {
          AttnCase x = c;
          x.decode.splits = 2;
          return x;
        }();
        const AttnRun split = perfect_attn_run(cc);
        std::vector<float> parts = split.partials;
        (void)nq;
        (void)slot;
        set_decode_out(run, merge_variant(cc, parts, true, true));
      },
      "attn (decode core)", /*first=*/true);
}

// --- the judge on the real kernels
// -----------------------------------------------------------------

// max |got − want| / bound over the elements with a bound (what the judge compares).
double ratio(std::span<const uint16_t> got, const AttnValues& v) {
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i)
    if (v.bound[i] > 0.0 && std::isfinite(v.value[i]))
      worst = std::max(worst, std::fabs(val(got[i]) - round_bf16(v.value[i])) / v.bound[i]);
  return worst;
}

struct Ratios {
  double q = 0, k = 0, prefill = 0, partials = 0, merge = 0, gate = 0;
};

// The same over FP32 values (the partials: no BF16 store, so the FP32 error itself shows).
double ratio_f32(std::span<const float> got, const AttnValues& v) {
  double worst = 0.0;

  for (size_t i = 0; i < got.size(); ++i)
    if (v.bound[i] > 0.0 && std::isfinite(v.value[i]))
      worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - v.value[i]) / v.bound[i]);
  return worst;
}

// Key rows of the decode rows (the test's own gather, block tables read the right way).
Gathered gather_decode(const AttnCase& c, const AttnRun& run, const BoundModel& bm,
                       bool with_next = false) {
  const AttnGeometry& g = c.geom;
  const uint64_t kvw = g.kv_width(), bs = c.cache.block_size, R = c.decode.rows;
  const uint64_t live = c.decode.live, mb = c.decode.block_table.size() / R;
  Gathered out;
  out.k.resize(live);
  out.v.resize(live);
  for (uint64_t r = 0; r < live; ++r) {
    const uint64_t n = static_cast<uint64_t>(c.decode.seq_lens[r]);
    // with_next: also key n (what a row leaking past p = n − 1 reads) where the table maps it.
    const uint64_t keys =
        with_next && (n / bs < mb && c.decode.block_table[r * mb + n / bs] >= 0) ? n + 1 : n;
    for (uint64_t j = 0; j < keys; ++j) {
      const uint64_t s = static_cast<uint64_t>(c.decode.block_table[r * mb + j / bs]) * bs + j % bs;
      push_slot(out.k[r], run.k_cache, s, kvw);
      push_slot(out.v[r], run.v_cache, s, kvw);
    }
    out.keys.push_back(AttnKeys{out.k[r], out.v[r], keys});
    out.pos.push_back(n - 1);
    out.seq.push_back(r);
  }
  const AttnStageInput in{c.qkv, g.qkv_dim, 0, R, g.nq, c.decode.positions, R, c.rope, c.q_norm};
  const AttnValues q = attn_stage_stored(g, in, bm);
  for (uint64_t i = 0; i < live * g.q_width(); ++i) out.q.push_back(q.value[i]);
  out.q_err.assign(q.bound.begin(),
                   q.bound.begin() + static_cast<std::ptrdiff_t>(live * g.q_width()));
  return out;
}

// The stage, prefill-core, merge and gate ratios of one judged run.
void measure(const AttnCase& c, const AttnRun& run, const BoundModel& bm, Ratios& w) {
  const AttnGeometry& g = c.geom;
  const uint64_t R = c.decode.rows, t = c.prefill.tokens();
  if (t > 0) {
    for (bool k : {false, true}) {
      const AttnStageInput in{
          std::span<const uint16_t>(c.qkv).subspan(R * g.qkv_dim),
          g.qkv_dim,
          k ? g.k_col0 : 0,
          t,
          k ? g.nkv : g.nq,
          c.prefill.positions,
          t,
          c.rope,
          k ? std::span<const uint16_t>(c.k_norm) : std::span<const uint16_t>(c.q_norm)};
      (k ? w.k : w.q) = std::max(k ? w.k : w.q, ratio(k ? run.k_scratch : run.q_copy,
                                                      attn_stage_fp64(g, in, Mode::faithful, &bm)));
    }
    const Gathered gp = gather_prefill(c, run, false);
    w.prefill = std::max(
        w.prefill, ratio(run.prefill_out, attn_core_fp64(g, gp.input(c, AttnVariant::spec), &bm)));
  }
  if (R > 0 && c.decode.splits > 1) {
    const uint64_t live = c.decode.live, per = g.nq * c.decode.splits * (g.hd + 2);
    const std::span<const float> parts =
        std::span<const float>(run.partials).subspan(0, live * per);
    const Gathered gd = gather_decode(c, run, bm);  // the spans below point into it
    AttnCoreInput din = gd.input(c, AttnVariant::spec);
    din.sinks = {};
    w.partials =
        std::max(w.partials, ratio_f32(parts, attn_partials_fp64(g, din, c.decode.splits,
                                                                 c.cache.block_size, parts, &bm)));
    w.merge = std::max(
        w.merge, ratio(std::span<const uint16_t>(run.decode_out).subspan(0, live * g.q_width()),
                       attn_merge_fp64(live, g.nq, g.hd, c.decode.splits, parts, c.sinks, &bm)));
  }
  if (g.gated)
    w.gate = std::max(w.gate, ratio(run.gated, attn_gate_fp64(g, R + t, run.attn, c.qkv, &bm)));
}

// Model-shaped passes (the harness's generator) through the CPU kernels and, where this build has
// it, the CUDA kernels on the simulator: every check of the judge passes, and the measured
// max |error| / bound is printed per stage.
TEST(OracleAttentionJudge, RealKernelsAgree) {
  std::vector<std::pair<std::string, BoundModel>> backends{{"cpu", cpu_bounds()}};
  if (cuda_sim_backend_built()) backends.emplace_back("cuda-sim", device_bounds());
  for (const auto& [name, bm] : backends) {
    const std::unique_ptr<Backend> be = make_backend(name);
    Ratios w;
    uint64_t seed = 40;
    for (gen::AttnFlavour f : gen::kAttnFlavours)
      for (bool sliding : {false, true}) {
        AttnCaseSpec s;
        s.config = gen::attn_config(f, 4, 2, 16);
        if (sliding && s.config.sliding_window == 0) continue;
        s.sliding = sliding;
        s.block_size = 5;
        s.streams = 2;
        s.L = 9;
        s.context = {3, 70};
        s.decode_rows = 3;
        s.live = 2;
        s.splits = f == gen::AttnFlavour::llama ? 1 : 3;
        s.decode_context = {7, 90};
        s.position_offset = f == gen::AttnFlavour::gpt_oss ? 100000 : 5;  // |θ| ~ 1e5
        const AttnCase c = make_attn_case(s, ++seed);
        const AttnRun run = run_attention(*be, c);
        const AgreementReport r = judge_attention(c, run, name, seed, bm);
        EXPECT_TRUE(r.passed()) << gen::to_string(f) << (sliding ? " sliding" : "") << ": "
                                << failing(r) << format_report(r);
        measure(c, run, bm, w);
      }
    std::printf(
        "  %s: max |err|/bound  q stage %.3f, k stage %.3f, prefill core %.3f, partials %.3f, "
        "merge %.3f, gate %.3f\n",
        name.c_str(), w.q, w.k, w.prefill, w.partials, w.merge, w.gate);
  }
}

// M-CAUSAL on the split-K path: the parts of a row that also sees p + 1 (the cache slot after
// the row's own key: poison or another key) — the partials' causal diagnosis names it.
TEST(OracleAttentionJudge, PlantedCausalLeakInSplitKPartials) {
  expect_caught(
      {false, false, true, false, false, 3},
      [](const AttnCase& c, AttnRun& run) {
        const BoundModel bm = cpu_bounds();
        const Gathered gd = gather_decode(c, run, bm, /*with_next=*/true);
        AttnCoreInput in = gd.input(c, AttnVariant::causal_leak);
        in.sinks = {};
        const AttnValues leak = attn_partials_fp64(c.geom, in, c.decode.splits, c.cache.block_size);
        for (size_t i = 0; i < leak.value.size(); ++i)
          run.partials[i] = static_cast<float>(leak.value[i]);
      },
      "partials (split-K, causal)", /*first=*/true);
}

}  // namespace
}  // namespace bufferlab::oracle
