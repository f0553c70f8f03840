// The FP64 references of the attention stages (attention.h; formulas pinned in core
// ops/attention.h): the stage function, the core, the split-K parts, the merge and the gate. The
// bounds they return with a BoundModel are derived in attention_bounds.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/oracle/attention.h"
#include "oracle_common.h"

namespace bufferlab::oracle {

namespace attn_ref {
namespace {

constexpr double kAttnNegInf = -std::numeric_limits<double>::infinity();

void attn_need(const char* what, uint64_t got, uint64_t want) {
  if (got < want)
    throw Error(fmt::format("attention oracle: {} holds {} elements, needs {}", what, got, want));
}

// The score scale the spec pins: fp32(1/sqrt(hd)).
double attn_score_scale(uint64_t hd) {
  return static_cast<double>(static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd))));
}

}  // namespace
}  // namespace attn_ref

uint64_t attn_rope_stream(const AttnGeometry& g, uint64_t i) {
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

uint64_t attn_first_key(uint64_t p, uint64_t window) {
  return window == 0 || p + 1 < window ? 0 : p + 1 - window;
}

bool attn_split_range(uint64_t lo, uint64_t p, uint64_t block_size, uint64_t splits, uint64_t k,
                      uint64_t& first, uint64_t& last) {
  const uint64_t b0 = lo / block_size, b1 = p / block_size;
  const uint64_t per = (b1 - b0 + 1 + splits - 1) / splits;
  const uint64_t kb0 = b0 + k * per;
  if (kb0 > b1) return false;
  const uint64_t kb1 = std::min(b1, kb0 + per - 1);
  first = std::max(lo, kb0 * block_size);
  last = std::min(p, kb1 * block_size + block_size - 1);
  return first <= last;
}

// --- stage function ---------------------------------------------------------------------------

namespace attn_ref {
namespace {

// The angle of frequency i at position `pos`: faithful = the FP32 product fp32(pos)·inv_freq
// (exact in FP64, then one rounding to FP32: the backend's θ bit for bit); exact = FP64.
double angle(uint32_t pos, float inv_freq, Mode mode) {
  if (mode == Mode::exact) return static_cast<double>(pos) * static_cast<double>(inv_freq);
  const float p = static_cast<float>(pos);
  return static_cast<double>(static_cast<float>(static_cast<double>(p) * inv_freq));
}

struct StageRow {
  std::vector<double> n;  // normed (or copied) values
  double m = 0.0;         // Σx²/hd + eps (qk_norm)
};

StageRow normed_row(const AttnGeometry& g, const uint16_t* x, std::span<const uint16_t> norm) {
  StageRow r;
  r.n.resize(g.hd);
  if (norm.empty()) {
    for (uint64_t i = 0; i < g.hd; ++i) r.n[i] = bf16_value(x[i]);
    return r;
  }
  double ss = 0.0;
  for (uint64_t i = 0; i < g.hd; ++i) ss += bf16_value(x[i]) * bf16_value(x[i]);
  r.m = ss / static_cast<double>(g.hd) + static_cast<double>(g.eps);
  const double inv = 1.0 / std::sqrt(r.m);
  for (uint64_t i = 0; i < g.hd; ++i) r.n[i] = bf16_value(x[i]) * inv * (1.0 + bf16_value(norm[i]));
  return r;
}

// S(x) and, with bm, the error bound before the store (pre_store) or of the stored value.
AttnValues stage_impl(const AttnGeometry& g, const AttnStageInput& in, Mode mode,
                      const BoundModel* bm, bool pre_store) {
  const auto store = [pre_store](double y, double e) { return pre_store ? e : stored_bf16(y, e); };
  const uint64_t hd = g.hd, half = g.rotary_dim / 2, width = mul(in.heads, hd);
  if (in.rows > 0)
    attn_need("stage source", in.src.size(), (in.rows - 1) * in.stride + in.col0 + width);
  if (half > 0) attn_need("rope table", in.rope.size(), half + 1);
  if (g.qk_norm) attn_need("qk_norm weight", in.norm.size(), hd);
  if (in.rows > 0 && half > 0)
    attn_need("positions", in.positions.size(), (g.pos_streams() - 1) * in.pos_stride + in.rows);
  const std::span<const uint16_t> norm = g.qk_norm ? in.norm : std::span<const uint16_t>{};
  const double af = half > 0 ? static_cast<double>(in.rope[half]) : 1.0;
  AttnValues out;
  out.value.assign(mul(in.rows, width), 0.0);
  if (bm != nullptr) out.bound.assign(out.value.size(), 0.0);
  for (uint64_t r = 0; r < in.rows; ++r)
    for (uint64_t h = 0; h < in.heads; ++h) {
      const uint16_t* x = in.src.data() + r * in.stride + in.col0 + h * hd;
      const StageRow row = normed_row(g, x, norm);
      double* y = out.value.data() + r * width + h * hd;
      std::copy(row.n.begin(), row.n.end(), y);
      const double theta_n =
          bm != nullptr && g.qk_norm ? attn_detail::stage_norm_rel(hd, row.m, *bm) : 0.0;
      double* b = bm != nullptr ? out.bound.data() + r * width + h * hd : nullptr;
      if (b != nullptr && g.qk_norm)
        for (uint64_t i = half * 2; i < hd; ++i)
          b[i] =
              store(row.n[i], theta_n * std::fabs(row.n[i]) + 3.0 * kUnderflowPerOp +
                                  gamma(static_cast<double>(hd + 16), kU64) * std::fabs(row.n[i]));
      for (uint64_t i = 0; i < half; ++i) {
        const uint64_t ia = g.rope_interleaved ? 2 * i : i;
        const uint64_t ib = g.rope_interleaved ? 2 * i + 1 : i + half;
        const uint32_t pos = in.positions[attn_rope_stream(g, i) * in.pos_stride + r];
        const double th = angle(pos, in.rope[i], mode);
        const double c = std::cos(th) * af, s = std::sin(th) * af;
        const double a = row.n[ia], bb = row.n[ib];
        y[ia] = a * c - bb * s;
        y[ib] = bb * c + a * s;
        if (b == nullptr) continue;
        b[ia] = store(y[ia], attn_detail::rope_pair_error(a, bb, c, s, y[ia], af, theta_n, *bm));
        b[ib] = store(y[ib], attn_detail::rope_pair_error(bb, a, c, s, y[ib], af, theta_n, *bm));
      }
    }
  return out;
}

}  // namespace
}  // namespace attn_ref

AttnValues attn_stage_fp64(const AttnGeometry& g, const AttnStageInput& in, Mode mode,
                           const BoundModel* bm) {
  return attn_ref::stage_impl(g, in, mode, bm, false);
}

// The backend stores bf16(ŷ) with |ŷ − y| ≤ e (the pre-store bound): round-to-nearest is monotone,
// so bf16(ŷ) lies between bf16(y − e) and bf16(y + e); where both equal bf16(y) the stored value
// is known exactly (uncertainty 0), else it is one of those neighbours.
AttnValues attn_stage_stored(const AttnGeometry& g, const AttnStageInput& in,
                             const BoundModel& bm) {
  AttnValues v = attn_ref::stage_impl(g, in, Mode::faithful, &bm, true);
  for (size_t i = 0; i < v.value.size(); ++i) {
    const double y = v.value[i], e = v.bound[i], r = round_bf16(y);
    v.value[i] = r;
    v.bound[i] = std::max(std::fabs(round_bf16(y - e) - r), std::fabs(round_bf16(y + e) - r));
  }
  return v;
}

// --- core ------------------------------------------------------------------------------------

namespace attn_detail {

SoftmaxResult softmax_fp64(const SoftmaxTerms& t) {
  SoftmaxResult r;
  r.o.assign(t.hd, 0.0);
  r.m = -std::numeric_limits<double>::infinity();
  for (double s : t.s) r.m = std::max(r.m, s);
  double num_l = 0.0;
  for (size_t j = 0; j < t.s.size(); ++j) {
    const double w = std::exp(t.s[j] - t.m_ref);
    num_l += w;
    for (uint64_t d = 0; d < t.hd; ++d) r.o[d] += w * bf16_value(t.v[j][d]);
  }
  if (t.sink) num_l += std::exp(t.sink_value - t.m_ref);
  r.l = num_l;
  if (num_l > 0.0)
    for (double& o : r.o) o /= num_l;
  else if (t.sink || !t.s.empty())
    std::fill(r.o.begin(), r.o.end(), std::numeric_limits<double>::quiet_NaN());
  return r;
}

}  // namespace attn_detail

namespace attn_ref {
namespace {

struct Reduction {
  uint64_t first = 0, last = 0;  // keys [first, last]
  bool empty = true;
};

// The key range of a row (before a split): [lo, p], or [lo, p + 1] for the causal-leak variant
// when the sequence's arrays hold that key.
Reduction row_range(const AttnCoreInput& in, uint64_t r, const AttnKeys& kv) {
  const uint64_t p = in.pos[r];
  if (p >= kv.n)
    throw Error(
        fmt::format("attention oracle: row {} at position {} has only {} keys", r, p, kv.n));
  Reduction red;
  red.first = attn_first_key(p, in.window);
  red.last = p;
  if (in.variant == AttnVariant::causal_leak && p + 1 < kv.n) red.last = p + 1;
  red.empty = false;
  return red;
}

uint64_t kv_head(const AttnGeometry& g, uint64_t q, AttnVariant v) {
  return v == AttnVariant::gqa_modulo ? q % g.nkv : q / g.group();
}

// The terms of one (row, head) reduction over keys [first, last].
attn_detail::SoftmaxTerms terms_of(const AttnGeometry& g, const AttnCoreInput& in, uint64_t r,
                                   uint64_t q, const Reduction& red, bool with_sink,
                                   const BoundModel* bm) {
  const uint64_t hd = g.hd, kvw = g.kv_width(), qw = g.q_width();
  const AttnKeys& kv = in.keys[in.seq[r]];
  const uint64_t kh = kv_head(g, q, in.variant);
  const double scale = attn_score_scale(hd);
  const double* qv = in.q.data() + r * qw + q * hd;
  const double* qe = in.q_err.empty() ? nullptr : in.q_err.data() + r * qw + q * hd;
  attn_detail::SoftmaxTerms t;
  t.hd = hd;
  for (uint64_t j = red.first; !red.empty && j <= red.last; ++j) {
    const uint64_t k_at = j * kvw + kh * hd;
    double dot = 0.0, D = 0.0, X = 0.0;
    for (uint64_t d = 0; d < hd; ++d) {
      const double kd = kv.k_values.empty() ? bf16_value(kv.k[k_at + d]) : kv.k_values[k_at + d];
      dot += qv[d] * kd;
      D += std::fabs(qv[d] * kd);
      if (qe != nullptr) X += qe[d] * std::fabs(kd);
    }
    const double s = dot * scale;
    t.s.push_back(s);
    t.e.push_back(bm != nullptr ? attn_detail::score_error(s, D, X, hd, scale, *bm) : 0.0);
    t.v.push_back(kv.v.data() + j * kvw + kh * hd);
  }
  t.tiles = red.empty ? 0 : red.last / kAttnKeyTile - red.first / kAttnKeyTile + 1;
  t.sink = with_sink;
  if (with_sink) t.sink_value = static_cast<double>(in.sinks[q]);
  t.m_ref = kAttnNegInf;
  for (double s : t.s) t.m_ref = std::max(t.m_ref, s);
  if (with_sink) t.m_ref = std::max(t.m_ref, t.sink_value);
  return t;
}

void check_core_input(const AttnGeometry& g, const AttnCoreInput& in) {
  const uint64_t rows = in.pos.size();
  attn_need("q", in.q.size(), mul(rows, g.q_width()));
  if (!in.q_err.empty()) attn_need("q error", in.q_err.size(), mul(rows, g.q_width()));
  attn_need("row sequences", in.seq.size(), rows);
  if (!in.sinks.empty()) attn_need("sinks", in.sinks.size(), g.nq);
  for (uint64_t r = 0; r < rows; ++r) {
    if (in.seq[r] >= in.keys.size())
      throw Error(fmt::format("attention oracle: row {} names sequence {} of {}", r, in.seq[r],
                              in.keys.size()));
    const AttnKeys& kv = in.keys[in.seq[r]];
    attn_need("keys", std::min(kv.k_values.empty() ? kv.k.size() : kv.k_values.size(), kv.v.size()),
              mul(kv.n, g.kv_width()));
  }
}

}  // namespace
}  // namespace attn_ref

AttnValues attn_core_fp64(const AttnGeometry& g, const AttnCoreInput& in, const BoundModel* bm) {
  using namespace attn_ref;
  check_core_input(g, in);
  const uint64_t rows = in.pos.size(), hd = g.hd, qw = g.q_width();
  AttnValues out;
  out.value.assign(mul(rows, qw), 0.0);
  if (bm != nullptr) out.bound.assign(out.value.size(), 0.0);
  for (uint64_t r = 0; r < rows; ++r) {
    const Reduction red = row_range(in, r, in.keys[in.seq[r]]);
    for (uint64_t q = 0; q < g.nq; ++q) {
      const attn_detail::SoftmaxTerms t = terms_of(g, in, r, q, red, !in.sinks.empty(), bm);
      attn_detail::SoftmaxResult res = attn_detail::softmax_fp64(t);
      std::copy(res.o.begin(), res.o.end(),
                out.value.begin() + static_cast<std::ptrdiff_t>(r * qw + q * hd));
      if (bm == nullptr) continue;
      attn_detail::softmax_bounds(t, *bm, res);
      for (uint64_t d = 0; d < hd; ++d)
        out.bound[r * qw + q * hd + d] = stored_bf16(res.o[d], res.o_bound[d]);
    }
  }
  return out;
}

AttnValues attn_partials_fp64(const AttnGeometry& g, const AttnCoreInput& in, uint64_t splits,
                              uint64_t block_size, std::span<const float> stored,
                              const BoundModel* bm) {
  using namespace attn_ref;
  check_core_input(g, in);
  if (splits == 0 || block_size == 0) throw Error("attention oracle: splits and block_size > 0");
  const uint64_t rows = in.pos.size(), hd = g.hd, slot = hd + 2;
  const uint64_t total = mul(mul(mul(rows, g.nq), splits), slot);
  if (!stored.empty()) attn_need("stored partials", stored.size(), total);
  AttnValues out;
  out.value.assign(total, 0.0);
  if (bm != nullptr) out.bound.assign(total, 0.0);
  for (uint64_t r = 0; r < rows; ++r) {
    const Reduction whole = row_range(in, r, in.keys[in.seq[r]]);
    for (uint64_t q = 0; q < g.nq; ++q)
      for (uint64_t k = 0; k < splits; ++k) {
        const uint64_t at = ((r * g.nq + q) * splits + k) * slot;
        Reduction red;
        red.empty =
            !attn_split_range(whole.first, whole.last, block_size, splits, k, red.first, red.last);
        double* o = out.value.data() + at;
        if (red.empty) {
          o[hd] = kAttnNegInf;  // o = 0, l = 0: exact (bound 0)
          continue;
        }
        attn_detail::SoftmaxTerms t = terms_of(g, in, r, q, red, false, bm);
        // l relative to the backend's stored maximum when it is a number (shift invariance lets
        // o use any); the bound below then holds for l against it.
        if (!stored.empty() && std::isfinite(stored[at + hd]))
          t.m_ref = static_cast<double>(stored[at + hd]);
        attn_detail::SoftmaxResult res = attn_detail::softmax_fp64(t);
        std::copy(res.o.begin(), res.o.end(), o);
        o[hd] = res.m;
        o[hd + 1] = res.l;
        if (bm == nullptr) continue;
        attn_detail::softmax_bounds(t, *bm, res);
        double* b = out.bound.data() + at;
        std::copy(res.o_bound.begin(), res.o_bound.end(), b);
        b[hd] = res.m_bound;
        b[hd + 1] = res.l_bound;
      }
  }
  return out;
}

AttnValues attn_merge_fp64(uint64_t rows, uint64_t nq, uint64_t hd, uint64_t splits,
                           std::span<const float> partials, std::span<const float> sinks,
                           const BoundModel* bm) {
  using namespace attn_ref;
  const uint64_t slot = hd + 2;
  attn_need("partials", partials.size(), mul(mul(mul(rows, nq), splits), slot));
  if (!sinks.empty()) attn_need("sinks", sinks.size(), nq);
  AttnValues out;
  out.value.assign(mul(rows, mul(nq, hd)), 0.0);
  if (bm != nullptr) out.bound.assign(out.value.size(), 0.0);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t q = 0; q < nq; ++q) {
      // The merge is a softmax over the parts: part k has "score" m_k and weight l_k, value o_k.
      const float* base = partials.data() + (r * nq + q) * splits * slot;
      double M = sinks.empty() ? kAttnNegInf : static_cast<double>(sinks[q]);
      for (uint64_t k = 0; k < splits; ++k)
        if (base[k * slot + hd + 1] > 0.0f)
          M = std::max(M, static_cast<double>(base[k * slot + hd]));
      double L = sinks.empty() ? 0.0 : std::exp(static_cast<double>(sinks[q]) - M);
      std::vector<double> num(hd, 0.0), err_num(hd, 0.0);
      double err_l = 0.0;
      for (uint64_t k = 0; k < splits; ++k) {
        const float* p = base + k * slot;
        if (!(p[hd + 1] > 0.0f)) continue;
        const double mk = static_cast<double>(p[hd]);
        const double w = static_cast<double>(p[hd + 1]) * std::exp(mk - M);
        L += w;
        const double rel =
            bm != nullptr ? attn_detail::merge_weight_rel(M - mk, splits, false, *bm) : 0.0;
        // An expf that underflows errs by 2^-126 absolute (attention_bounds.cpp "merge").
        const double floor = attn_detail::kExpUnderflowAbs * static_cast<double>(p[hd + 1]);
        err_l += w * rel + floor;
        for (uint64_t d = 0; d < hd; ++d) {
          num[d] += w * static_cast<double>(p[d]);
          err_num[d] += (w * rel + floor) * std::fabs(static_cast<double>(p[d]));
        }
      }
      if (!sinks.empty() && bm != nullptr) {
        const double sv = static_cast<double>(sinks[q]);
        err_l += std::exp(sv - M) * attn_detail::merge_weight_rel(M - sv, splits, true, *bm);
      }
      double* o = out.value.data() + (r * nq + q) * hd;
      for (uint64_t d = 0; d < hd; ++d)
        o[d] = L > 0.0 ? num[d] / L : std::numeric_limits<double>::quiet_NaN();
      if (bm == nullptr) continue;
      double* b = out.bound.data() + (r * nq + q) * hd;
      for (uint64_t d = 0; d < hd; ++d)
        b[d] = stored_bf16(
            o[d], attn_detail::quotient_error(err_num[d], err_l, o[d], L, splits + hd, *bm));
    }
  return out;
}

AttnValues attn_gate_fp64(const AttnGeometry& g, uint64_t rows, std::span<const uint16_t> attn,
                          std::span<const uint16_t> qkv, const BoundModel* bm) {
  using namespace attn_ref;
  const uint64_t qw = g.q_width();
  attn_need("attn_output", attn.size(), mul(rows, qw));
  attn_need("qkv_output", qkv.size(), mul(rows, g.qkv_dim));
  AttnValues out;
  out.value.assign(mul(rows, qw), 0.0);
  if (bm != nullptr) out.bound.assign(out.value.size(), 0.0);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < qw; ++c) {
      const double a = bf16_value(attn[r * qw + c]);
      const double gv = bf16_value(qkv[r * g.qkv_dim + g.gate_col0 + c]);
      const double y = a * sigmoid(gv);
      out.value[r * qw + c] = y;
      if (bm != nullptr) out.bound[r * qw + c] = stored_bf16(y, attn_detail::gate_error(a, y, *bm));
    }
  return out;
}

}  // namespace bufferlab::oracle
