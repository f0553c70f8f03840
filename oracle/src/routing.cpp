// FP64 oracle of MoE routing: router logits and their bounds, top-k selection, tie stability.
#include "bufferlab/oracle/routing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounds.h"
#include "oracle_common.h"

namespace bufferlab::oracle {
namespace {

// The value an FP32 store holds. A value past FLT_MAX is past the rounding threshold to Inf
// (up to half an ULP, which the bounds do not cover anyway: domain Σ|x·w| < FLT_MAX).
double stored_f32(double v) {
  if (std::isfinite(v) && std::fabs(v) > FLT_MAX) return std::copysign(INFINITY, v);
  return static_cast<float>(v);
}

// FP64 → FP32 → BF16 is innocuous double rounding (53 ≥ 2·24 + 2, 24 ≥ 2·8 + 2; Figueroa
// 1995): the result is the BF16 rounding of the FP64 value.
double stored_bf16_value(double v) { return round_to_bf16(static_cast<float>(stored_f32(v))); }

// Half a BF16 ULP at magnitude m: BF16 keeps 8 significant bits over FP32's exponent range, so
// within the binade [2^p, 2^(p+1)) (p ≥ −126; below, the subnormal spacing of 2^-126) the ULP
// is 2^(p−7). A value rounded from anything of magnitude ≤ m moves by at most this much.
double half_bf16_ulp(double m) {
  if (m == 0.0 || !std::isfinite(m)) return m;
  int ex = 0;
  std::frexp(m, &ex);  // m = f·2^ex, f in [0.5, 1): p = ex − 1
  return std::ldexp(1.0, std::max(ex - 1, -126) - 8);
}

// max(l, 0) + log1p(e^-|l|): e^-|l| ≤ 1 never overflows.
double softplus(double l) { return std::max(l, 0.0) + std::log1p(std::exp(-std::fabs(l))); }

double derivative(MoeScoring scoring, double l) {
  if (scoring == MoeScoring::sigmoid) return sigmoid(l) * (1.0 - sigmoid(l));
  const double sp = softplus(l);  // d/dl √softplus(l) = σ/(2√softplus): softplus′ = σ
  return sp == 0.0 ? 0.0 : sigmoid(l) / (2.0 * std::sqrt(sp));  // → 0 as l → −∞
}

// sup |f′| over [lo, hi]. Both derivatives are positive and unimodal: σ′ = σ(1 − σ) peaks at
// l = 0 (σ = 1/2); (√softplus)′ peaks at l* ≈ 0.92142245 (found numerically, unimodality
// checked on a grid in test_oracle_routing.cpp). The sup is at the peak clamped into [lo, hi].
double sup_derivative(MoeScoring scoring, double lo, double hi) {
  constexpr double kSqrtSoftplusPeak = 0.9214224541602128;
  const double peak = scoring == MoeScoring::sigmoid ? 0.0 : kSqrtSoftplusPeak;
  return derivative(scoring, std::clamp(peak, lo, hi));
}

// Softmax over the whole row; NaN everywhere when the row holds a NaN (routing.h).
std::vector<double> softmax_row(const double* l, uint64_t n) {
  std::vector<double> p(n, NAN);
  if (std::any_of(l, l + n, [](double v) { return std::isnan(v); })) return p;
  const double m = *std::max_element(l, l + n);
  double sum = 0.0;
  for (uint64_t e = 0; e < n; ++e) sum += p[e] = std::exp(l[e] - m);
  for (double& v : p) v /= sum;
  return p;
}

struct RowSelection {
  std::vector<uint32_t> ids;
  std::vector<double> weights;
};

// The oracle's order of the row's experts under the total order.
std::vector<uint32_t> ranked(const double* keys, uint64_t n) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t i, uint32_t j) { return ranks_before(keys[i], i, keys[j], j); });
  return order;
}

// Renormalised softmax weights of the selected ids (routing.h): e^(l_i − m_sel) over their sum,
// m_sel = the largest selected logit. softmax_i / Σ_sel softmax_j = e^(l_i − m)/Σ_sel e^(l_j − m)
// for any m (the factor e^(m − m')/Σ_all cancels), so this IS the softmax over all E' logits
// renormalised over the selection — evaluated where the largest term is 1 and the sum ≥ 1.
// A NaN in the row: NaN everywhere (as the softmax of the row).
std::vector<double> renormalised_softmax(const double* l, uint64_t n,
                                         const std::vector<uint32_t>& ids) {
  std::vector<double> w(ids.size(), NAN);
  if (std::any_of(l, l + n, [](double v) { return std::isnan(v); })) return w;
  double m_sel = -INFINITY;
  for (uint32_t id : ids) m_sel = std::max(m_sel, l[id]);
  double sum = 0.0;
  for (size_t j = 0; j < ids.size(); ++j) sum += w[j] = std::exp(l[ids[j]] - m_sel);
  for (double& v : w) v /= sum;
  return w;
}

void normalise_and_scale(const MoeTopKOp& op, std::vector<double>& w) {
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  // Softmax with norm_topk_prob arrives renormalised already (renormalised_softmax).
  if (op.norm_topk_prob && op.scoring != MoeScoring::softmax && sum > 1e-20)
    for (double& v : w) v /= sum;
  for (double& v : w) v *= op.routed_scaling_factor;
}

}  // namespace

// ---- Router GEMM ----

// BF16·BF16 and FP32·BF16 products are exact in FP64 (16 and 32 significant bits ≤ 53); the
// FP64 sum of K terms is within γ_K(2^-53)·Σ|x·w|, far below any FP32 bound.
std::vector<double> router_logits(const MoeRouterOp& op, const RouterInputs& in, Mode mode) {
  const auto [rows, hidden, experts] = op.shape();
  const bool f32_in = op.precision == RouterPrecision::fp32_routing;
  require_size(op.params(), f32_in ? "x_f32" : "x_bf16",
               f32_in ? in.x_f32.size() : in.x_bf16.size(), (Size(rows) * hidden).value());
  require_size(op.params(), "weight", in.weight.size(), (Size(experts) * hidden).value());

  std::vector<double> logits((Size(rows) * experts).value());
  for (uint64_t t = 0; t < rows; ++t) {
    for (uint64_t e = 0; e < experts; ++e) {
      double acc = 0.0;
      for (uint64_t k = 0; k < hidden; ++k) {
        const double x =
            f32_in ? in.x_f32[t * hidden + k] : bf16_bits_to_f32(in.x_bf16[t * hidden + k]);
        acc += x * bf16_bits_to_f32(in.weight[e * hidden + k]);
      }
      if (mode == Mode::faithful)
        acc = op.precision == RouterPrecision::bf16 ? stored_bf16_value(acc) : stored_f32(acc);
      logits[t * experts + e] = acc;
    }
  }
  return logits;
}

// Higham, "Accuracy and Stability of Numerical Algorithms", §3.1: an FP32 dot product of length
// K in any summation order (sequential, SIMD lanes, split-K, warp trees) is within
// γ_K·Σ|x_k·w_k| of the exact value, counting one rounding per product and at most K − 1
// additions on every path, + the underflow floor (bounds.h) of the K products (only added
// later: amplifier 1; additions landing in the subnormals are exact), K·2^-150: tiny products
// (or a logit of cancelling terms) can be subnormal. The bf16 path then stores the FP32 value v̂
// (|v̂| ≤ |l| + e) in BF16: half a BF16 ULP at |l| + e more.
std::vector<double> router_logit_bounds(const MoeRouterOp& op, const RouterInputs& in, double u) {
  const uint64_t hidden = op.shape().hidden;
  const double g = gamma(static_cast<double>(hidden), u);
  RouterInputs abs_in = in;  // Σ|x·w| is the router GEMM over |x| and |w|
  for (uint16_t& b : abs_in.x_bf16) b &= 0x7FFFu;
  for (float& v : abs_in.x_f32) v = std::fabs(v);
  for (uint16_t& b : abs_in.weight) b &= 0x7FFFu;
  const std::vector<double> sum_abs = router_logits(op, abs_in, Mode::exact);
  const std::vector<double> logits = router_logits(op, in, Mode::exact);

  std::vector<double> bounds(sum_abs.size());
  for (size_t i = 0; i < bounds.size(); ++i) {
    const double e = fp32_bound(g * sum_abs[i], static_cast<double>(hidden));
    bounds[i] =
        op.precision == RouterPrecision::bf16 ? e + half_bf16_ulp(std::fabs(logits[i]) + e) : e;
  }
  return bounds;
}

// ---- Top-k selection ----

bool ranks_before(double a, uint32_t i, double b, uint32_t j) {
  const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
  if (a_nan || b_nan) return a_nan == b_nan ? i < j : b_nan;  // numbers before NaN
  if (a != b) return a > b;
  return i < j;
}

double routing_score(MoeScoring scoring, double logit) {
  switch (scoring) {
    case MoeScoring::sigmoid:
      return sigmoid(logit);
    case MoeScoring::sqrtsoftplus:
      return std::sqrt(softplus(logit));
    case MoeScoring::softmax:
      break;
  }
  return logit;
}

TopKReference select_topk(const MoeTopKOp& op, const TopKInputs& in) {
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  const std::string params = op.params();
  if (top_k == 0 || top_k > experts)
    throw Error(fmt::format("{}: top_k must be in [1, experts]", params));
  require_size(params, "logits", in.logits.size(), (Size(rows) * experts).value());
  if (op.use_bias) require_size(params, "bias", in.bias.size(), experts);
  if (op.hash) {
    require_size(params, "token_ids", in.token_ids.size(), rows);
    require_size(params, "tid2eid", in.tid2eid.size(), (Size(vocab) * top_k).value());
  }
  const bool softmax = op.scoring == MoeScoring::softmax;

  TopKReference ref;
  ref.ids.reserve(rows * top_k);
  ref.weights.reserve(rows * top_k);
  ref.keys.resize(rows * experts);
  for (uint64_t t = 0; t < rows; ++t) {
    const double* l = in.logits.data() + t * experts;
    double* key = ref.keys.data() + t * experts;
    std::vector<double> score(experts);
    for (uint64_t e = 0; e < experts; ++e) {
      score[e] = routing_score(op.scoring, l[e]);
      key[e] = softmax ? l[e] : score[e] + (op.use_bias ? double{in.bias[e]} : 0.0);
      ref.nan_keys += std::isnan(key[e]) ? 1 : 0;
    }
    const bool renormalised_softmax_weights = softmax && op.norm_topk_prob;
    if (softmax && !renormalised_softmax_weights) score = softmax_row(l, experts);

    std::vector<uint32_t> ids;
    if (op.hash) {
      const uint32_t token = in.token_ids[t];
      if (token >= vocab)
        throw Error(fmt::format("{}: token_ids[{}] = {} is not below vocab", params, t, token));
      for (uint64_t j = 0; j < top_k; ++j) {
        const auto id = static_cast<uint32_t>(in.tid2eid[token * top_k + j]);
        ids.push_back(id >= routed ? 0u : id);
      }
    } else {
      ids = ranked(key, experts);
      ids.resize(top_k);
    }
    std::vector<double> w;
    if (renormalised_softmax_weights)
      w = renormalised_softmax(l, experts, ids);
    else
      for (uint32_t id : ids) w.push_back(score[id]);
    normalise_and_scale(op, w);
    ref.ids.insert(ref.ids.end(), ids.begin(), ids.end());
    ref.weights.insert(ref.weights.end(), w.begin(), w.end());
  }
  return ref;
}

// Score-space bound of one key s + b, s = f(l), for a backend holding a logit l̂, |l̂ − l| ≤ e:
//   f(l̂) − f(l): mean value theorem, |·| ≤ d = sup_[l−e, l+e] |f′|·e.
//   FP32 evaluation of f at l̂ (u = 2^-24; ulp counts cover CUDA's documented maxima —
//   expf 2 ulp, log1pf 1 ulp, IEEE division and sqrtf — and glibc's, each taken as 2 ulp =
//   4u): sigmoid as 1/(1 + e^-l) or e^l/(1 + e^l): exp 4u, 1 + t 4u (the exp error passes at
//   most whole) + u, quotient u (+ 4u for the second form): ≤ 10u. sqrtsoftplus:
//   e^-|l| 4u, log1p passes a relative input error at most whole (t/((1 + t)·log1p t) ≤ 1)
//   and adds 4u, + max(l, 0) (non-negative terms) u, sqrt halves it and adds u: ≤ 10u.
//   With Higham's Lemma 3.1 that is |f̂ − f(l̂)| ≤ γ_10·|f(l̂)| ≤ γ_10·(|s| + d) — as long as
//   nothing underflows; the underflow slack z (score_underflow_slack, below) is absolute.
//   FP32 s + b: u·|ŝ + b| ≤ u·(|s + b| + d + γ_10·(|s| + d) + z). (A sum that lands in the
//   subnormals is exact.) Total: d + eval + z + u·(|s + b| + d + eval + z).
//
// FP32 underflow of f, which the relative γ_10·|s| does not cover (Lemma 3.1 assumes none):
//   sigmoid 1/(1 + e^-l): for l ≤ −88.7 e^-l overflows to +Inf and the FP32 result is 0, while
//     σ(l) < e^l < 2^-127; above, a subnormal quotient is off by ≤ 2^-150 (half a subnormal
//     ULP) beyond its relative bound. The form e^l/(1 + e^l) flushes e^l < 2^-149 to 0 the same
//     way. z = 2^-126.
//   sqrtsoftplus √(max(l,0) + log1p(e^-|l|)), l < 0: e^l in the FP32 subnormals (or flushed to
//     0 below 2^-150) is off by ≤ δ = 2^-148 absolute, which log1p passes at most whole (its
//     slope is ≤ 1); √(a + δ) − √a ≤ √δ = 2^-74. (For l ≥ 0 the argument is ≥ ln 2 and nothing
//     underflows.) z = 2^-74.
double score_underflow_slack(MoeScoring scoring) {
  switch (scoring) {
    case MoeScoring::sigmoid:
      return 0x1p-126;
    case MoeScoring::sqrtsoftplus:
      return 0x1p-74;
    case MoeScoring::softmax:
      break;
  }
  return 0.0;
}

std::vector<double> score_key_bounds(const MoeTopKOp& op, const std::vector<double>& logits,
                                     const std::vector<double>& logit_bounds,
                                     const std::vector<float>& bias) {
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  const std::string params = op.params();
  require_size(params, "logits", logits.size(), (Size(rows) * experts).value());
  require_size(params, "logit_bounds", logit_bounds.size(), logits.size());
  if (op.use_bias) require_size(params, "bias", bias.size(), experts);
  if (op.scoring == MoeScoring::softmax) return logit_bounds;

  constexpr double u = kFp32UnitRoundoff;
  const double g10 = gamma(10.0, u);
  const double z = score_underflow_slack(op.scoring);
  std::vector<double> bounds(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const double l = logits[i], e = logit_bounds[i];
    const double b = op.use_bias ? double{bias[i % experts]} : 0.0;
    const double s = routing_score(op.scoring, l);
    const double d = sup_derivative(op.scoring, l - e, l + e) * e;
    const double eval = g10 * (std::fabs(s) + d) + z;
    bounds[i] = d + eval + u * (std::fabs(s + b) + d + eval);
  }
  return bounds;
}

// ---- Tie stability ----

namespace {

struct RowView {
  const double* key;
  const double* bound;
  bool provably_before(uint32_t i, uint32_t j) const {
    const double a = key[i], b = key[j], sum = bound[i] + bound[j];
    if (std::isnan(a) || std::isnan(b) || sum == 0.0) return ranks_before(a, i, b, j);
    return a - b > sum;
  }
};

std::optional<TieViolation> violation(const RowView& v, uint64_t row, uint32_t before,
                                      uint32_t after, std::string reason) {
  return TieViolation{row,          before,          after,          v.key[before],
                      v.key[after], v.bound[before], v.bound[after], std::move(reason)};
}

// The first invalid id (out of range, repeated), if any.
std::optional<TieViolation> invalid_id(const RowView& v, uint64_t row, const uint32_t* ids,
                                       uint64_t k, uint64_t cols) {
  for (uint64_t p = 0; p < k; ++p) {
    if (ids[p] >= cols)
      return TieViolation{row, ids[p], ids[p], NAN, NAN, NAN, NAN, "id out of range"};
    if (std::find(ids, ids + p, ids[p]) != ids + p)
      return violation(v, row, ids[p], ids[p], "duplicate id");
  }
  return std::nullopt;
}

std::optional<TieViolation> set_violation(const RowView& v, uint64_t row, const uint32_t* ids,
                                          uint64_t k, uint64_t cols) {
  for (uint32_t i = 0; i < cols; ++i) {
    if (std::find(ids, ids + k, i) != ids + k) continue;
    for (uint64_t p = 0; p < k; ++p)
      if (v.provably_before(i, ids[p])) return violation(v, row, i, ids[p], "set");
  }
  return std::nullopt;
}

std::optional<TieViolation> order_violation(const RowView& v, uint64_t row, const uint32_t* ids,
                                            uint64_t k) {
  for (uint64_t p = 0; p < k; ++p)
    for (uint64_t q = p + 1; q < k; ++q)
      if (v.provably_before(ids[q], ids[p])) return violation(v, row, ids[q], ids[p], "order");
  return std::nullopt;
}

}  // namespace

TieCheck tie_stability_check(const std::vector<double>& keys, const std::vector<double>& bounds,
                             uint64_t cols, uint64_t top_k,
                             const std::vector<uint32_t>& backend_ids) {
  if (cols == 0 || top_k == 0 || top_k > cols || backend_ids.size() % top_k != 0)
    throw Error(fmt::format("tie_stability_check: top_k {} / cols {} / {} ids do not fit", top_k,
                            cols, backend_ids.size()));
  const uint64_t rows = backend_ids.size() / top_k;
  require_size("tie_stability_check", "keys", keys.size(), (Size(rows) * cols).value());
  require_size("tie_stability_check", "bounds", bounds.size(), keys.size());

  TieCheck check;
  check.rows.resize(rows);
  for (uint64_t t = 0; t < rows; ++t) {
    const RowView v{keys.data() + t * cols, bounds.data() + t * cols};
    const uint32_t* ids = backend_ids.data() + t * top_k;
    const std::vector<uint32_t> order = ranked(v.key, cols);
    TieRowVerdict& r = check.rows[t];
    r.cut_gap = INFINITY;
    if (top_k < cols) {
      const uint32_t a = order[top_k - 1], b = order[top_k];
      r.cut_gap = v.key[a] - v.key[b];
      r.cut_bound = v.bound[a] + v.bound[b];
      check.cut_unresolved += v.provably_before(a, b) ? 0 : 1;
    }
    std::optional<TieViolation> bad = invalid_id(v, t, ids, top_k, cols);
    if (bad) {
      r.set_ok = r.order_ok = false;
    } else {
      std::optional<TieViolation> order_bad = order_violation(v, t, ids, top_k);
      bad = set_violation(v, t, ids, top_k, cols);
      r.set_ok = !bad;
      r.order_ok = !order_bad;
      if (!bad) bad = std::move(order_bad);
    }
    r.same_set = std::is_permutation(ids, ids + top_k, order.begin());
    check.sets_differ += r.same_set ? 0 : 1;
    if (!bad) continue;
    ++check.failures;
    if (!check.first_bad) check.first_bad = std::move(bad);
  }
  return check;
}

}  // namespace bufferlab::oracle
